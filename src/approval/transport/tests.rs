use super::*;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
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
    let (status, reply) = post_json(&endpoint, body, Some("s3cret"), SECOND, 1024, None)?;
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
fn the_host_header_names_host_and_port_and_nothing_else() -> TestResult {
    let respond = reply("HTTP/1.1 204 No Content\r\n\r\n");
    let (endpoint, server) = tcp_server(move |s| respond(s))?;
    let Endpoint::Http { url } = endpoint else {
        panic!("not http: {endpoint:?}");
    };
    let with_credentials = Endpoint::Http {
        url: url.replace("http://", "http://user:pw@"),
    };
    let (status, _) = post_json(&with_credentials, b"{}", None, SECOND, 1024, None)?;
    assert_eq!(status, 204);
    let seen = join(server)?;
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches("/approve");
    assert_eq!(seen.header("host"), Some(authority), "{}", seen.head);
    Ok(())
}

#[test]
fn server_error_is_a_reply_not_an_error() -> TestResult {
    let respond = reply("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops");
    let (endpoint, server) = tcp_server(move |s| respond(s))?;
    let (status, reply) = post_json(&endpoint, b"{}", None, SECOND, 1024, None)?;
    assert_eq!((status, reply.as_slice()), (500, &b"oops"[..]));
    join(server)?;
    Ok(())
}

#[test]
fn redirect_is_returned_not_followed() -> TestResult {
    // Were it followed, it would hit a dead port and fail instead of returning 302.
    let dead = dead_port()?;
    let respond = reply(format!(
        "HTTP/1.1 302 Found\r\nLocation: http://{dead}/elsewhere\r\nContent-Length: 0\r\n\r\n"
    ));
    let (endpoint, server) = tcp_server(move |s| respond(s))?;
    let (status, reply) = post_json(&endpoint, b"{}", Some("t"), SECOND, 1024, None)?;
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
    let result = post_json(&endpoint, b"{}", None, SHORT, 1024, None);
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
    let result = post_json(&endpoint, b"{}", None, SHORT, 1024, None);
    assert!(matches!(result, Err(TransportError::Timeout)), "{result:?}");
    join(server)?;
    Ok(())
}

#[test]
fn connection_closed_mid_reply_is_io() -> TestResult {
    let respond = reply("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
    let (endpoint, server) = tcp_server(move |s| respond(s))?;
    let result = post_json(&endpoint, b"{}", None, SECOND, 1024, None);
    assert!(matches!(result, Err(TransportError::Io(_))), "{result:?}");
    join(server)?;
    Ok(())
}

#[test]
fn announced_body_over_the_limit_is_too_large() -> TestResult {
    let (endpoint, server) = tcp_server(|s| {
        s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 1 << 20).as_bytes())?;
        // The client may hang up before reading all of it; that is the point.
        let _ = s.write_all(&vec![b'a'; 1 << 20]);
        Ok(())
    })?;
    let result = post_json(&endpoint, b"{}", None, SECOND, 64 << 10, None);
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
    let result = post_json(&endpoint, b"{}", None, SECOND, 64 << 10, None);
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
    let (status, reply) = post_json(&endpoint, b"{}", None, SECOND, 10, None)?;
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
    let result = post_json(&endpoint, b"{}", None, SECOND, 1024, None);
    assert!(matches!(result, Err(TransportError::Io(_))), "{result:?}");
    Ok(())
}

#[test]
fn missing_unix_socket_is_io() -> TestResult {
    let dir = tempfile::tempdir()?;
    let endpoint = Endpoint::Unix {
        socket: dir.path().join("nobody-home.sock"),
    };
    let result = post_json(&endpoint, b"{}", None, SECOND, 1024, None);
    assert!(matches!(result, Err(TransportError::Io(_))), "{result:?}");
    Ok(())
}

#[test]
fn unix_socket_round_trip() -> TestResult {
    let dir = tempfile::tempdir()?;
    let respond = reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
    let (endpoint, server) = unix_server(dir.path(), move |s| respond(s))?;
    let (status, reply) = post_json(&endpoint, br#"{"q":1}"#, None, SECOND, 1024, None)?;
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
    let result = post_json(&endpoint, b"{}", None, SHORT, 1024, None);
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
            None,
        ));
    });
    let result = rx.recv_timeout(2 * SECOND)?;
    assert!(matches!(result, Err(TransportError::Timeout)), "{result:?}");
    Ok(())
}

/// `post_json` to `endpoint` with `deadline`, on a thread of its own, so that a
/// regression fails the test instead of hanging it.
fn post_bounded(
    endpoint: Endpoint,
    deadline: Duration,
) -> Result<Result<(u16, Vec<u8>), TransportError>, std::sync::mpsc::RecvTimeoutError> {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(post_json(&endpoint, b"{}", None, deadline, 1024, None));
    });
    rx.recv_timeout(deadline + 2 * SECOND)
}

/// Bytes that never stop coming and never make a reply: hyper keeps parsing them within
/// one poll, and the deadline still ends the exchange.
#[test]
fn a_flood_that_never_makes_a_reply_still_times_out() -> TestResult {
    let floods: [&[u8]; 2] = [
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"0000000000000000000000000000000000000000000000000000000000000000",
    ];
    for (i, flood) in floods.into_iter().enumerate() {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/", listener.local_addr()?);
        thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let _ = read_request(&mut stream);
            if i == 1 {
                let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                let _ = stream.write_all(head.as_bytes());
            }
            while stream.write_all(flood).is_ok() {}
        });
        let started = Instant::now();
        let result = post_bounded(Endpoint::Http { url }, SHORT)?;
        assert!(
            matches!(result, Err(TransportError::Timeout)),
            "{i}: {result:?}"
        );
        assert!(
            started.elapsed() < 2 * SECOND,
            "{i}: {:?}",
            started.elapsed()
        );
    }
    Ok(())
}

/// A pipe whose read end becomes readable (an interrupt) `after` from now.
fn interrupt_after(after: Duration) -> io::Result<(OwnedFd, JoinHandle<()>)> {
    let (r, w) = nix::unistd::pipe()?;
    let writer = thread::spawn(move || {
        thread::sleep(after);
        let _ = nix::unistd::write(&w, b"x");
    });
    Ok((r, writer))
}

#[test]
fn an_interrupt_ends_the_wait_for_a_silent_server_at_once() -> TestResult {
    let (endpoint, server) = tcp_server(|s| {
        let _ = s.read(&mut [0u8; 1]);
        Ok(())
    })?;
    let (interrupt, writer) = interrupt_after(SHORT)?;
    let started = Instant::now();
    let result = post_json(
        &endpoint,
        b"{}",
        None,
        10 * SECOND,
        1024,
        Some(interrupt.as_fd()),
    );
    let took = started.elapsed();
    assert!(
        matches!(result, Err(TransportError::Interrupted)),
        "{result:?}"
    );
    assert!(took >= SHORT && took < 2 * SECOND, "took {took:?}");
    let _ = writer.join();
    join(server)?;
    Ok(())
}

#[test]
fn an_interrupt_ends_a_connect_to_a_full_unix_backlog() -> TestResult {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("stuck.sock");
    let listener = UnixListener::bind(&socket)?;
    socket::listen(&listener, socket::Backlog::new(0)?)?;
    let _queued = UnixStream::connect(&socket)?;
    let (interrupt, writer) = interrupt_after(SHORT)?;
    let started = Instant::now();
    let result = post_json(
        &Endpoint::Unix { socket },
        b"{}",
        None,
        10 * SECOND,
        1024,
        Some(interrupt.as_fd()),
    );
    assert!(
        matches!(result, Err(TransportError::Interrupted)),
        "{result:?}"
    );
    assert!(started.elapsed() < 2 * SECOND);
    let _ = writer.join();
    Ok(())
}

#[test]
fn an_interrupt_that_never_comes_changes_nothing() -> TestResult {
    let respond = reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
    let (endpoint, server) = tcp_server(move |s| respond(s))?;
    let (interrupt, _never) = nix::unistd::pipe()?;
    let (status, body) = post_json(
        &endpoint,
        b"{}",
        None,
        SECOND,
        1024,
        Some(interrupt.as_fd()),
    )?;
    assert_eq!((status, body.as_slice()), (200, &b"{}"[..]));
    join(server)?;
    Ok(())
}

#[test]
fn token_cannot_inject_headers() -> TestResult {
    // The header is refused before connecting, so nothing reaches the listener.
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let endpoint = Endpoint::Http {
        url: format!("http://{}/", listener.local_addr()?),
    };
    let result = post_json(&endpoint, b"{}", Some("t\r\nX-Evil: 1"), SECOND, 1024, None);
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
