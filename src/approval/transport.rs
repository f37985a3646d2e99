//! Posting a JSON request to the approval endpoint and reading its reply.
//!
//! sandgate makes the connection; hyper (the HTTP/1.1 of the approvals server and its
//! clients too) does the exchange on it. What fits an approval round trip:
//!
//! * one deadline for the whole exchange (look-up, connect, send, headers and body), rather
//!   than per-phase limits that could add up to more than asked for;
//! * a redirect is returned to the caller as is, never followed, so the request (and its
//!   bearer token) only ever goes to the configured endpoint;
//! * 4xx/5xx are answers the caller interprets, not errors;
//! * no proxy from the environment (`HTTP_PROXY`, `ALL_PROXY`): approval traffic goes
//!   nowhere the policy author did not name.
//!
//! Everything runs on the calling thread: sandgate must have no other thread when it forks
//! the command. A host name is looked up in a child process ([`super::name_lookup`]); the
//! TCP connect is non-blocking and waited for with `poll`; hyper's exchange is polled on
//! this thread and waits with `poll` too, with no runtime that could start a thread or
//! leave anything behind. Every wait also watches the interrupt fd the caller passes, so
//! the deadline and an interrupt (SIGINT, SIGTERM, SIGHUP while the question is open) end
//! it at once.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Bytes;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use hyper::{Request, Uri};
use nix::errno::Errno;
use nix::libc::time_t;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    self, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage, UnixAddr,
};
use nix::sys::time::TimeVal;

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
            return match s.parse::<Uri>() {
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

impl From<io::Error> for TransportError {
    fn from(e: io::Error) -> Self {
        TransportError::Io(e.to_string())
    }
}

impl From<Errno> for TransportError {
    fn from(e: Errno) -> Self {
        io::Error::from(e).into()
    }
}

impl From<hyper::Error> for TransportError {
    fn from(e: hyper::Error) -> Self {
        TransportError::Io(e.to_string())
    }
}

/// Sends `body` (JSON) with `Content-Type: application/json` and, when `token` is Some,
/// `Authorization: Bearer <token>`.
///
/// Returns the HTTP status and the body. Redirects are NOT followed (a 302 is returned as
/// status 302). Non-2xx statuses are returned as `Ok((status, body))`, not errors. The whole
/// exchange (lookup + connect + send + receive) must finish before `timeout`, otherwise
/// `Err(Timeout)`; as soon as `interrupt` is readable, `Err(Interrupted)`. A body larger
/// than `max_body` bytes → `Err(TooLarge)`, read no further than the frame that passed the
/// limit (nothing at all when `Content-Length` already says too much). Starts no thread.
pub fn post_json(
    endpoint: &Endpoint,
    body: &[u8],
    token: Option<&str>,
    timeout: Duration,
    max_body: usize,
    interrupt: Option<BorrowedFd<'_>>,
) -> Result<(u16, Vec<u8>), TransportError> {
    let wait = Wait {
        deadline: Instant::now().checked_add(timeout),
        interrupt,
    };
    // Checked before anything is sent: a token with a line break cannot smuggle a header.
    let authorization = token
        .map(|token| HeaderValue::from_str(&format!("Bearer {token}")))
        .transpose()
        .map_err(|_| TransportError::Io("the approval token is not a valid header".into()))?;
    let (stream, target, host) = match endpoint {
        Endpoint::Http { url } => {
            let uri: Uri = url
                .parse()
                .map_err(|_| TransportError::Io(format!("not a valid URL: {url}")))?;
            let host = uri.host().unwrap_or_default();
            let port = uri.port_u16().unwrap_or(80);
            let stream = connect_tcp(&resolve(host, port, &wait)?, &wait)?;
            let target = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
            // Host and port only: credentials written into the URL are not a host.
            let authority = match uri.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            (Stream::Tcp(stream), target, authority)
        }
        // The request path is `/` and the host a placeholder: the socket is the address.
        Endpoint::Unix { socket } | Endpoint::Server { socket } => {
            let stream = connect_unix(socket, &wait)?;
            if matches!(endpoint, Endpoint::Server { .. }) {
                crate::confinement::check_peer(&stream).map_err(|why| {
                    TransportError::Io(format!(
                        "the approvals server at {} is not to be trusted: {why}",
                        socket.display()
                    ))
                })?;
            }
            (Stream::Unix(stream), "/".to_owned(), "localhost".to_owned())
        }
    };
    let mut request = Request::post(target)
        .header(HOST, host)
        .header(CONTENT_TYPE, "application/json");
    if let Some(authorization) = authorization {
        request = request.header(AUTHORIZATION, authorization);
    }
    let request = request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .map_err(|e| TransportError::Io(e.to_string()))?;
    wait.exchange(stream, request, max_body)
}

/// A connected socket to the endpoint.
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// What every wait of one exchange watches besides its socket: the deadline and the
/// caller's interrupt fd.
struct Wait<'a> {
    deadline: Option<Instant>,
    interrupt: Option<BorrowedFd<'a>>,
}

impl Wait<'_> {
    /// Time left, or `Timeout` once none is.
    fn left(&self) -> Result<Option<Duration>, TransportError> {
        let Some(at) = self.deadline else {
            return Ok(None);
        };
        match at.saturating_duration_since(Instant::now()) {
            left if left.is_zero() => Err(TransportError::Timeout),
            left => Ok(Some(left)),
        }
    }

    /// Waits until `fd` reports any of `events` (or an error or hang-up, which the next
    /// call on it then reports), the deadline passes or the interrupt fd is readable.
    fn until(&self, fd: BorrowedFd<'_>, events: PollFlags) -> Result<(), TransportError> {
        loop {
            let timeout = self
                .left()?
                .map_or(PollTimeout::NONE, crate::sys::poll_timeout);
            let mut fds = vec![PollFd::new(fd, events)];
            fds.extend(self.interrupt.map(|i| PollFd::new(i, PollFlags::POLLIN)));
            match poll(&mut fds, timeout) {
                Err(Errno::EINTR) | Ok(0) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => {}
            }
            if fds
                .get(1)
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty())
            {
                return Err(TransportError::Interrupted);
            }
            if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                return Ok(());
            }
        }
    }

    /// `Interrupted` when the interrupt fd is readable now.
    fn check(&self) -> Result<(), TransportError> {
        let Some(interrupt) = self.interrupt else {
            return Ok(());
        };
        let mut fds = [PollFd::new(interrupt, PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(n) if n > 0 => Err(TransportError::Interrupted),
            _ => Ok(()),
        }
    }

    /// Sends `request` over `stream` and reads the reply until it is complete, the deadline
    /// or an interrupt. hyper frames the exchange over [`Pollable`]; [`Wait::drive`] polls
    /// it on this thread. No runtime is made: tokio's would leave its process-wide signal
    /// pipe open in sandgate, under the proxy forked after the answer.
    fn exchange(
        &self,
        stream: Stream,
        request: Request<Full<Bytes>>,
        max_body: usize,
    ) -> Result<(u16, Vec<u8>), TransportError> {
        let turn = Turn::new();
        match stream {
            Stream::Tcp(s) => {
                let socket = s.as_fd().try_clone_to_owned()?;
                let io = Pollable::new(s, &turn)?;
                self.drive(round_trip(io, request, max_body), socket.as_fd(), &turn)?
            }
            Stream::Unix(s) => {
                let socket = s.as_fd().try_clone_to_owned()?;
                let io = Pollable::new(s, &turn)?;
                self.drive(round_trip(io, request, max_body), socket.as_fd(), &turn)?
            }
        }
    }

    /// Polls `exchange` to its end on this thread: again at once when it woke itself (one
    /// part of hyper handing work to another), else once `socket` is ready for what the
    /// exchange last wanted — or never, at the deadline or an interrupt.
    fn drive<F: Future>(
        &self,
        exchange: F,
        socket: BorrowedFd<'_>,
        turn: &Turn,
    ) -> Result<F::Output, TransportError> {
        let woken = Arc::new(Woken(AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&woken));
        let mut context = TaskContext::from_waker(&waker);
        let mut exchange = std::pin::pin!(exchange);
        loop {
            self.check()?;
            self.left()?;
            turn.wanted.set(PollFlags::empty());
            turn.budget.set(Turn::BUDGET);
            woken.0.store(false, Ordering::SeqCst);
            if let Poll::Ready(done) = exchange.as_mut().poll(&mut context) {
                return Ok(done);
            }
            if woken.0.load(Ordering::SeqCst) {
                continue;
            }
            if turn.wanted.get().is_empty() {
                // Neither woken nor waiting on the socket: nothing could move it on.
                return Err(TransportError::Io("the exchange stalled".into()));
            }
            self.until(socket, turn.wanted.get())?;
        }
    }
}

/// A waker that only notes it was called (see [`Wait::drive`]).
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What one poll of the exchange did with the socket, for [`Wait::drive`].
struct Turn {
    /// What a read or write that would block waits for.
    wanted: Cell<PollFlags>,
    /// Reads and writes left before the exchange must yield: hyper keeps reading while
    /// bytes come (a flood of `100` replies, a chunk size of endless zeros), and the
    /// deadline and the interrupt are only looked at between polls.
    budget: Cell<u32>,
}

impl Turn {
    const BUDGET: u32 = 64;

    fn new() -> Turn {
        Turn {
            wanted: Cell::new(PollFlags::empty()),
            budget: Cell::new(Turn::BUDGET),
        }
    }
}

/// A connected, non-blocking socket for hyper: a read or write that would block says so
/// in its [`Turn`] and is pending, and so is one past the turn's budget (woken, so that
/// it is polled again once the deadline and the interrupt were looked at).
struct Pollable<'a, S> {
    stream: S,
    turn: &'a Turn,
}

impl<'a, S: AsFd> Pollable<'a, S>
where
    for<'s> &'s S: io::Read + io::Write,
{
    fn new(stream: S, turn: &'a Turn) -> io::Result<Self> {
        rustix::io::ioctl_fionbio(&stream, true)?;
        Ok(Pollable { stream, turn })
    }

    /// `op` on the socket, retried when a signal interrupted it; pending, with `events`
    /// wanted, when it would block; pending and woken at once past the turn's budget.
    fn attempt<T>(
        &self,
        context: &TaskContext<'_>,
        events: PollFlags,
        mut op: impl FnMut(&S) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        let Some(left) = self.turn.budget.get().checked_sub(1) else {
            context.waker().wake_by_ref();
            return Poll::Pending;
        };
        self.turn.budget.set(left);
        loop {
            match op(&self.stream) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.turn.wanted.set(self.turn.wanted.get() | events);
                    return Poll::Pending;
                }
                done => return Poll::Ready(done),
            }
        }
    }
}

impl<S: AsFd + Unpin> hyper::rt::Read for Pollable<'_, S>
where
    for<'s> &'s S: io::Read + io::Write,
{
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut TaskContext<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let mut chunk = [0u8; 8192];
        let want = buf.remaining().min(chunk.len());
        let read = self.attempt(context, PollFlags::POLLIN, |mut s| {
            io::Read::read(&mut s, &mut chunk[..want])
        });
        read.map_ok(|n| buf.put_slice(&chunk[..n]))
    }
}

impl<S: AsFd + Unpin> hyper::rt::Write for Pollable<'_, S>
where
    for<'s> &'s S: io::Read + io::Write,
{
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.attempt(context, PollFlags::POLLOUT, |mut s| {
            io::Write::write(&mut s, buf)
        })
    }

    /// A socket holds nothing back to flush.
    fn poll_flush(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Closed when dropped, after the reply.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// One HTTP/1.1 request and its reply over `io`, the body bounded by `max_body`; the
/// connection is driven in the same future, alongside the reply.
async fn round_trip<T>(
    io: T,
    request: Request<Full<Bytes>>,
    max_body: usize,
) -> Result<(u16, Vec<u8>), TransportError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin,
{
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_BUFFER)
        .handshake(io)
        .await?;
    let reply = async {
        let reply = sender.send_request(request).await?;
        let status = reply.status().as_u16();
        // An announced length over the limit needs no reading at all.
        let announced = reply
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if announced.is_some_and(|len| len > u64::try_from(max_body).unwrap_or(u64::MAX)) {
            return Err(TransportError::TooLarge);
        }
        let body = Limited::new(reply.into_body(), max_body)
            .collect()
            .await
            .map_err(|e| match e.downcast::<LengthLimitError>() {
                Ok(_) => TransportError::TooLarge,
                Err(e) => TransportError::Io(e.to_string()),
            })?;
        Ok((status, body.to_bytes().to_vec()))
    };
    tokio::pin!(connection, reply);
    let (mut connected, mut broken) = (true, None);
    loop {
        tokio::select! {
            biased;
            // A reply read whole stands; one cut short says why the connection broke.
            result = &mut reply => return match (result, broken) {
                (Err(_), Some(why)) => Err(why),
                (result, _) => result,
            },
            // Ended first: the reply (read already, or not coming) is all to wait for.
            ended = &mut connection, if connected => {
                connected = false;
                broken = ended.err().map(TransportError::from);
            }
        }
    }
}

/// The most hyper buffers of a reply at once (its smallest allowed is 8 KiB): a reply too
/// large is refused once this much past the limit at most.
const MAX_BUFFER: usize = 64 * 1024;

/// The addresses of `host`: an IP literal (the usual loopback endpoint) as is; a name
/// looked up in a child process ([`name_lookup`]), never on a thread.
fn resolve(host: &str, port: u16, wait: &Wait<'_>) -> Result<Vec<SocketAddr>, TransportError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    name_lookup::resolve(host, port, wait.deadline, wait.interrupt).map_err(|e| match e {
        LookupError::Timeout => TransportError::Timeout,
        LookupError::Interrupted => TransportError::Interrupted,
        LookupError::Failed(why) => TransportError::Io(why),
    })
}

/// Dials `addrs` in turn, each with a non-blocking connect waited for with `poll`; out of
/// time or interrupted, no other address gets a chance.
fn connect_tcp(addrs: &[SocketAddr], wait: &Wait<'_>) -> Result<TcpStream, TransportError> {
    let mut last = TransportError::Io("the host has no address".into());
    for addr in addrs {
        match connect_one(*addr, wait) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e @ (TransportError::Timeout | TransportError::Interrupted)) => return Err(e),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn connect_one(addr: SocketAddr, wait: &Wait<'_>) -> Result<TcpStream, TransportError> {
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
    )?;
    match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) => {}
        // The handshake goes on in the kernel; a signal only interrupted the call.
        Err(Errno::EINPROGRESS | Errno::EINTR) => {
            wait.until(fd.as_fd(), PollFlags::POLLOUT)?;
            let err = socket::getsockopt(&fd, sockopt::SocketError)?;
            if err != 0 {
                return Err(io::Error::from_raw_os_error(err).into());
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(TcpStream::from(fd))
}

/// How long a blocking unix connect, which cannot watch the interrupt fd itself, goes on
/// before the interrupt fd is looked at again.
const SLICE: Duration = Duration::from_millis(50);

/// Connects to `path`, giving up when the time runs out or an interrupt arrives.
///
/// A connect to a unix listener whose accept queue is full cannot be waited for with
/// `poll` (a non-blocking one just fails with EAGAIN), so it blocks, bounded by
/// `SO_SNDTIMEO` set to a short slice, and is retried until the deadline.
fn connect_unix(path: &Path, wait: &Wait<'_>) -> Result<UnixStream, TransportError> {
    let addr = UnixAddr::new(path)?;
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    loop {
        wait.check()?;
        let slice = wait.left()?.map_or(SLICE, |left| left.min(SLICE));
        // A zero timeval means "wait forever", so never let the rest round down to it.
        let slice = slice.max(Duration::from_micros(1));
        let tv = TimeVal::new(
            slice.as_secs().try_into().unwrap_or(time_t::MAX),
            slice.subsec_micros().into(),
        );
        socket::setsockopt(&fd, sockopt::SendTimeout, &tv)?;
        match socket::connect(fd.as_raw_fd(), &addr) {
            Ok(()) => return Ok(UnixStream::from(fd)),
            // A signal interrupted the wait, or the slice ran out with the accept queue
            // still full: the socket is still unconnected, so try again with the time left.
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests;
