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
//! ureq does the HTTP/1.1 framing; the sockets are sandgate's own, plugged into ureq's
//! transport layer ([`ureq::unversioned::transport`]): a [`Connector`] per endpoint kind and
//! one [`Transport`] over a non-blocking socket. The whole exchange runs on the calling
//! thread — sandgate must have no other thread when it forks the command — and every wait
//! is a `poll` on the socket *and* the interrupt fd the caller passes, so the deadline and
//! an interrupt (SIGINT, SIGTERM, SIGHUP while the question is open) end it at once. For
//! the same reason host names are looked up in a child process ([`super::name_lookup`]),
//! never on ureq's resolver thread. ureq marks that layer as not (yet) covered by semver
//! (breaking changes only in minor releases), so the dependency should be kept on a `3.5`
//! minor line.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc::time_t;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    self, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage, UnixAddr,
};
use nix::sys::time::TimeVal;
use ureq::config::Config;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};
use ureq::{Agent, Timeout};

use super::name_lookup::{self, LookupError};

/// Where the approval endpoint lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `http://HOST:PORT/PATH`
    Http { url: String },
    /// `unix:/PATH/TO/SOCKET` — HTTP over a unix stream socket; the request path is `/`.
    Unix { socket: PathBuf },
    /// The caller's own `sandgate approvals serve`, found at the default socket rather
    /// than configured: a unix endpoint whose server must, on the very connection the
    /// question goes over, be the caller's and outside any sandbox.
    Server { socket: PathBuf },
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
    /// The interrupt fd became readable before the reply was complete.
    #[error("interrupted while waiting for the approval endpoint")]
    Interrupted,
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
            e if is_interrupted(&e) => TransportError::Interrupted,
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

/// The marker inside the `io::Error` a transport step returns when the interrupt fd fired.
#[derive(Debug)]
struct Interrupted;

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

fn interrupted() -> ureq::Error {
    ureq::Error::Io(io::Error::other(Interrupted))
}

/// Whether `e` is the error [`interrupted`] made.
fn is_interrupted(e: &ureq::Error) -> bool {
    matches!(e, ureq::Error::Io(io) if io.get_ref().is_some_and(|inner| inner.is::<Interrupted>()))
}

/// Sends `body` (JSON) with `Content-Type: application/json` and, when `token` is Some,
/// `Authorization: Bearer <token>`.
///
/// Returns the HTTP status and the body. Redirects are NOT followed (a 302 is returned as
/// status 302). Non-2xx statuses are returned as `Ok((status, body))`, not errors. The whole
/// exchange (lookup + connect + send + receive) must finish before `timeout`, otherwise
/// `Err(Timeout)`; as soon as `interrupt` is readable, `Err(Interrupted)`. A body larger
/// than `max_body` bytes → `Err(TooLarge)`, having read at most one byte past the limit
/// (none at all when `Content-Length` already says too much). Starts no thread.
pub fn post_json(
    endpoint: &Endpoint,
    body: &[u8],
    token: Option<&str>,
    timeout: Duration,
    max_body: usize,
    interrupt: Option<BorrowedFd<'_>>,
) -> Result<(u16, Vec<u8>), TransportError> {
    let watch = Watch {
        interrupt: interrupt
            .map(|fd| fd.try_clone_to_owned().map(Arc::new))
            .transpose()
            .map_err(|e| TransportError::Io(format!("cannot watch for interrupts: {e}")))?,
    };
    let config = Config::builder()
        .timeout_global(Some(timeout))
        .max_redirects(0)
        .http_status_as_error(false)
        .proxy(None)
        .build();
    let (agent, url) = match endpoint {
        Endpoint::Http { url } => (
            Agent::with_parts(
                config,
                TcpConnector {
                    watch: watch.clone(),
                },
                NameResolver { watch },
            ),
            url.as_str(),
        ),
        // The host in the URL only ends up in the `Host` header: the connector ignores it.
        Endpoint::Unix { socket } | Endpoint::Server { socket } => (
            Agent::with_parts(
                config,
                UnixConnector {
                    socket: socket.clone(),
                    watch,
                    vet_server: matches!(endpoint, Endpoint::Server { .. }),
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

/// What every wait of one exchange watches besides its socket: the caller's interrupt fd.
#[derive(Debug, Clone, Default)]
struct Watch {
    interrupt: Option<Arc<OwnedFd>>,
}

impl Watch {
    /// Waits until `fd` reports any of `events` (or an error or hang-up, which the next
    /// read or write then reports), the deadline passes (`Error::Timeout`) or the
    /// interrupt fd is readable.
    fn wait(
        &self,
        fd: BorrowedFd<'_>,
        events: PollFlags,
        deadline: &Deadline,
    ) -> Result<(), ureq::Error> {
        loop {
            let timeout = deadline
                .left()?
                .map_or(PollTimeout::NONE, crate::sys::poll_timeout);
            let mut fds = vec![PollFd::new(fd, events)];
            if let Some(interrupt) = &self.interrupt {
                fds.push(PollFd::new(interrupt.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, timeout) {
                Err(Errno::EINTR) | Ok(0) => continue,
                Err(e) => return Err(io::Error::from(e).into()),
                Ok(_) => {}
            }
            if fds
                .get(1)
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty())
            {
                return Err(interrupted());
            }
            if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                return Ok(());
            }
        }
    }

    /// `Err` when the interrupt fd is readable now.
    fn check(&self) -> Result<(), ureq::Error> {
        let Some(interrupt) = &self.interrupt else {
            return Ok(());
        };
        let mut fds = [PollFd::new(interrupt.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(n) if n > 0 => Err(interrupted()),
            _ => Ok(()),
        }
    }
}

/// ureq's own capacity for resolved addresses.
const MAX_ADDRS: usize = 16;

/// Resolver for http agents: an IP literal (the usual loopback endpoint) is used as is; a
/// name is looked up in a child process ([`name_lookup`]), never on a thread.
#[derive(Debug)]
struct NameResolver {
    watch: Watch,
}

impl Resolver for NameResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(80);
        let found = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => {
                let deadline = Deadline::new(timeout);
                let interrupt = self.watch.interrupt.as_deref().map(AsFd::as_fd);
                name_lookup::resolve(host, port, deadline.at, interrupt).map_err(|e| match e {
                    LookupError::Timeout => ureq::Error::Timeout(deadline.reason),
                    LookupError::Interrupted => interrupted(),
                    LookupError::Failed(why) => io::Error::other(why).into(),
                })?
            }
        };
        let mut addrs = self.empty();
        for addr in found.into_iter().take(MAX_ADDRS) {
            if addrs.try_push(addr).is_err() {
                break;
            }
        }
        Ok(addrs)
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

/// Dials the resolved addresses in turn, each with a non-blocking connect.
#[derive(Debug)]
struct TcpConnector {
    watch: Watch,
}

impl Connector for TcpConnector {
    type Out = SocketTransport<TcpStream>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let deadline = Deadline::new(details.timeout);
        let mut last = None;
        for addr in details.addrs.iter() {
            match connect_tcp(*addr, &deadline, &self.watch) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Some(SocketTransport::new(
                        stream,
                        details.config,
                        self.watch.clone(),
                    )));
                }
                // Out of time or interrupted: no other address gets a chance either.
                Err(e @ ureq::Error::Timeout(_)) => return Err(e),
                Err(e) if is_interrupted(&e) => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ureq::Error::HostNotFound))
    }
}

/// Connects a non-blocking TCP socket to `addr`, waiting for the handshake with `poll`.
fn connect_tcp(
    addr: SocketAddr,
    deadline: &Deadline,
    watch: &Watch,
) -> Result<TcpStream, ureq::Error> {
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd = socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(io::Error::from)?;
    match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) => {}
        // The handshake goes on in the kernel; a signal only interrupted the call.
        Err(Errno::EINPROGRESS | Errno::EINTR) => {
            watch.wait(fd.as_fd(), PollFlags::POLLOUT, deadline)?;
            let err = socket::getsockopt(&fd, sockopt::SocketError).map_err(io::Error::from)?;
            if err != 0 {
                return Err(io::Error::from_raw_os_error(err).into());
            }
        }
        Err(e) => return Err(io::Error::from(e).into()),
    }
    Ok(TcpStream::from(fd))
}

/// Dials `socket` for every connection ureq asks for.
#[derive(Debug)]
struct UnixConnector {
    socket: PathBuf,
    watch: Watch,
    /// Check the server process behind the connection (see [`Endpoint::Server`]).
    vet_server: bool,
}

impl Connector for UnixConnector {
    type Out = SocketTransport<UnixStream>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let stream = connect_unix(&self.socket, details.timeout, &self.watch)?;
        if self.vet_server {
            crate::confinement::check_peer(&stream).map_err(|why| {
                io::Error::other(format!(
                    "the approvals server at {} is not to be trusted: {why}",
                    self.socket.display()
                ))
            })?;
        }
        Ok(Some(SocketTransport::new(
            stream,
            details.config,
            self.watch.clone(),
        )))
    }
}

/// How long one blocking unix connect may wait before the interrupt fd is looked at again.
const UNIX_CONNECT_SLICE: Duration = Duration::from_millis(50);

/// Connects to `path`, giving up when `timeout` runs out or an interrupt arrives.
///
/// A connect to a unix listener whose accept queue is full cannot be waited for with
/// `poll` (a non-blocking one just fails with EAGAIN), so it blocks, bounded by
/// `SO_SNDTIMEO` set to a short slice, and is retried until the deadline.
fn connect_unix(
    path: &Path,
    timeout: NextTimeout,
    watch: &Watch,
) -> Result<UnixStream, ureq::Error> {
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
        watch.check()?;
        let slice = deadline
            .left()?
            .map_or(UNIX_CONNECT_SLICE, |left| left.min(UNIX_CONNECT_SLICE));
        // A zero timeval means "wait forever", so never let the rest round down to it.
        let slice = slice.max(Duration::from_micros(1));
        let tv = TimeVal::new(
            slice.as_secs().try_into().unwrap_or(time_t::MAX),
            slice.subsec_micros().into(),
        );
        socket::setsockopt(&fd, sockopt::SendTimeout, &tv).map_err(io::Error::from)?;
        match socket::connect(fd.as_raw_fd(), &addr) {
            Ok(()) => {
                let stream = UnixStream::from(fd);
                stream.set_nonblocking(true)?;
                return Ok(stream);
            }
            // A signal interrupted the wait, or the slice ran out with the accept queue
            // still full: the socket is still unconnected, so try again with the time left.
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(e) => return Err(io::Error::from(e).into()),
        }
    }
}

/// HTTP/1.1 bytes over a connected, non-blocking socket; every wait is a [`Watch::wait`].
#[derive(Debug)]
struct SocketTransport<S> {
    stream: S,
    buffers: LazyBuffers,
    watch: Watch,
}

impl<S> SocketTransport<S> {
    fn new(stream: S, config: &Config, watch: Watch) -> Self {
        Self {
            stream,
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
            watch,
        }
    }
}

impl<S> Transport for SocketTransport<S>
where
    S: Read + Write + AsFd + fmt::Debug + Send + Sync + 'static,
{
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let deadline = Deadline::new(timeout.for_write());
        let output = &self.buffers.output()[..amount];
        let mut written = 0;
        while written < output.len() {
            self.watch
                .wait(self.stream.as_fd(), PollFlags::POLLOUT, &deadline)?;
            match self.stream.write(&output[written..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
                Ok(n) => written += n,
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let deadline = Deadline::new(timeout.for_read());
        loop {
            self.watch
                .wait(self.stream.as_fd(), PollFlags::POLLIN, &deadline)?;
            match self.stream.read(self.buffers.input_append_buf()) {
                Ok(n) => {
                    self.buffers.input_appended(n);
                    return Ok(n > 0);
                }
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn is_open(&mut self) -> bool {
        // Each agent makes exactly one request, so a connection is never reused.
        false
    }
}

/// A non-blocking read or write that found nothing to do, or was interrupted by a signal:
/// wait again.
fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
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
}

#[cfg(test)]
mod tests;
