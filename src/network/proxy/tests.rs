//! The proxy end to end on 127.0.0.1: a real listener served by `run` on its own thread, a
//! pipe as the hang-up fd, and a small upstream HTTP server that records what reaches it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::*;
use crate::policy::host_rules::parse_entries;

const BODY: &str = "hello from upstream";
const WAIT: Duration = Duration::from_secs(10);

/// An HTTP/1.1 server on 127.0.0.1 that answers every request with `BODY` and sends each
/// request's head (request line and headers) down `seen`.
struct Upstream {
    port: u16,
    seen: mpsc::Receiver<String>,
}

impl Upstream {
    fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local_addr: {e}"))
            .port();
        let (tell, seen) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let tell = tell.clone();
                std::thread::spawn(move || answer_requests(stream, &tell));
            }
        });
        Upstream { port, seen }
    }

    /// The next request head that reached the upstream.
    fn next(&self) -> String {
        self.seen
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("no request reached the upstream: {e}"))
    }

    fn saw_nothing(&self) -> bool {
        self.seen.recv_timeout(Duration::from_millis(200)).is_err()
    }
}

fn answer_requests(mut stream: TcpStream, tell: &mpsc::Sender<String>) {
    let _ = stream.set_read_timeout(Some(WAIT));
    loop {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let _ = tell.send(head);
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n{BODY}",
            BODY.len()
        );
        if stream.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Reads up to and including the blank line that ends an HTTP head.
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// A proxy served by `run` on a thread, with the refusals it reported.
struct Proxy {
    addr: SocketAddr,
    hang_up: Option<OwnedFd>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
    refusals: Arc<Mutex<Vec<Refusal>>>,
}

impl Proxy {
    fn start(allowed: &[&str], denied: &[&str], allow_private: bool) -> Proxy {
        let rules = HostRules {
            allowed: parse_entries(allowed).unwrap(),
            denied: parse_entries(denied).unwrap(),
            allow_private,
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local_addr: {e}"));
        let (until, hang_up) = nix::unistd::pipe().unwrap_or_else(|e| panic!("pipe: {e}"));
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let recorded = refusals.clone();
        // Recording late on purpose: a client that sees its refusal before the proxy has
        // finished reporting it finds no refusal recorded, and the test fails.
        let refused = Box::new(move |refusal: &Refusal| {
            std::thread::sleep(Duration::from_millis(300));
            lock(&recorded).push(refusal.clone());
        });
        let thread = std::thread::spawn(move || ready(listener, until)?.serve(rules, refused));
        Proxy {
            addr,
            hang_up: Some(hang_up),
            thread: Some(thread),
            refusals,
        }
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).unwrap_or_else(|e| panic!("connect: {e}"));
        stream
            .set_read_timeout(Some(WAIT))
            .unwrap_or_else(|e| panic!("timeout: {e}"));
        stream
    }

    /// Sends `request` and reads the whole answer (the request asks the proxy to close).
    fn exchange(&self, request: &str) -> String {
        let mut stream = self.connect();
        send(&mut stream, request.as_bytes());
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    }

    fn refusals(&self) -> Vec<Refusal> {
        lock(&self.refusals).clone()
    }

    /// Closes the hang-up pipe's write end and waits for `run` to return.
    fn stop(mut self) {
        drop(self.hang_up.take());
        let thread = self
            .thread
            .take()
            .unwrap_or_else(|| panic!("stopped twice"));
        let started = Instant::now();
        while !thread.is_finished() {
            assert!(
                started.elapsed() < WAIT,
                "run did not return after the hang-up"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        match thread.join() {
            Ok(result) => result.unwrap_or_else(|e| panic!("run failed: {e}")),
            Err(_) => panic!("run panicked"),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn send(stream: &mut TcpStream, bytes: &[u8]) {
    stream
        .write_all(bytes)
        .unwrap_or_else(|e| panic!("write: {e}"));
}

fn get(url: &str, host: &str) -> String {
    format!("GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

fn status(answer: &str) -> &str {
    answer.lines().next().unwrap_or("")
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

#[test]
fn http_request_is_forwarded_in_origin_form_without_proxy_headers() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let proxy = Proxy::start(&[&format!("127.0.0.1:{port}")], &[], true);
    let answer = proxy.exchange(&format!(
        "GET http://127.0.0.1:{port}/simple/pkg/?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
         X-Kept: yes\r\nConnection: close\r\n\r\n"
    ));
    assert!(status(&answer).contains(" 200 "), "{answer}");
    assert_eq!(body(&answer), BODY);
    let head = upstream.next();
    let lower = head.to_ascii_lowercase();
    assert!(
        head.starts_with("GET /simple/pkg/?q=1 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        lower.contains(&format!("host: 127.0.0.1:{port}\r\n")),
        "{head}"
    );
    assert!(lower.contains("x-kept: yes\r\n"), "{head}");
    assert!(!lower.contains("proxy-"), "{head}");
    assert!(!lower.contains("connection: close"), "{head}");
    // Host names the URL's host, not another site behind the same address.
    let answer = proxy.exchange(&format!(
        "GET http://user:pw@127.0.0.1:{port}/x HTTP/1.1\r\nHost: other.example\r\n\
         Connection: close\r\n\r\n"
    ));
    assert!(status(&answer).contains(" 200 "), "{answer}");
    let head = upstream.next().to_ascii_lowercase();
    assert!(
        head.contains(&format!("\r\nhost: 127.0.0.1:{port}\r\n")),
        "{head}"
    );
    assert!(
        !head.contains("other.example") && !head.contains("user"),
        "{head}"
    );
    assert!(proxy.refusals().is_empty());
    proxy.stop();
}

#[test]
fn connect_tunnel_carries_bytes_both_ways() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let proxy = Proxy::start(&[&format!("127.0.0.1:{port}")], &[], true);
    let mut stream = proxy.connect();
    send(
        &mut stream,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
    );
    let head = read_head(&mut stream).unwrap_or_else(|| panic!("no answer to CONNECT"));
    assert!(status(&head).contains(" 200 "), "{head}");
    // Through the tunnel: a request the upstream reads as sent, and its answer back.
    send(
        &mut stream,
        b"GET /through-the-tunnel HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    let answer = read_head(&mut stream).unwrap_or_else(|| panic!("no answer in the tunnel"));
    assert!(status(&answer).contains(" 200 "), "{answer}");
    let mut rest = vec![0u8; BODY.len()];
    stream
        .read_exact(&mut rest)
        .unwrap_or_else(|e| panic!("tunnel body: {e}"));
    assert_eq!(rest, BODY.as_bytes());
    assert!(upstream
        .next()
        .starts_with("GET /through-the-tunnel HTTP/1.1\r\n"));
    proxy.stop();
}

/// A SOCKS5 CONNECT by hand: greeting, request, reply code (and the reply's rest).
fn socks_connect(proxy: &Proxy, target: &[u8], port: u16) -> (TcpStream, u8) {
    let mut stream = proxy.connect();
    send(&mut stream, &[5, 1, 0]);
    let mut choice = [0u8; 2];
    stream
        .read_exact(&mut choice)
        .unwrap_or_else(|e| panic!("method choice: {e}"));
    assert_eq!(choice, [5, 0], "no-auth must be chosen");
    let mut request = vec![5, 1, 0];
    request.extend_from_slice(target);
    request.extend_from_slice(&port.to_be_bytes());
    send(&mut stream, &request);
    let mut reply = [0u8; 10];
    stream
        .read_exact(&mut reply)
        .unwrap_or_else(|e| panic!("SOCKS reply: {e}"));
    assert_eq!(
        (reply[0], reply[3]),
        (5, 1),
        "version and IPv4 bound address: {reply:?}"
    );
    (stream, reply[1])
}

fn domain(name: &str) -> Vec<u8> {
    let mut target = vec![3, name.len() as u8];
    target.extend_from_slice(name.as_bytes());
    target
}

fn assert_http_through(mut stream: TcpStream, upstream: &Upstream, path: &str) {
    send(
        &mut stream,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    );
    let head = read_head(&mut stream).unwrap_or_else(|| panic!("no answer through SOCKS"));
    assert!(status(&head).contains(" 200 "), "{head}");
    assert!(upstream
        .next()
        .starts_with(&format!("GET {path} HTTP/1.1\r\n")));
}

#[test]
fn socks5_connects_by_domain_name_and_by_ipv4() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let proxy = Proxy::start(
        &[&format!("localhost:{port}"), &format!("127.0.0.1:{port}")],
        &[],
        true,
    );
    let (stream, code) = socks_connect(&proxy, &domain("localhost"), port);
    assert_eq!(code, 0, "CONNECT localhost must succeed");
    assert_http_through(stream, &upstream, "/by-name");
    let (stream, code) = socks_connect(&proxy, &[1, 127, 0, 0, 1], port);
    assert_eq!(code, 0, "CONNECT 127.0.0.1 must succeed");
    assert_http_through(stream, &upstream, "/by-address");
    assert!(proxy.refusals().is_empty());
    proxy.stop();
}

#[test]
fn socks5_refuses_other_commands_and_unlisted_hosts() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let proxy = Proxy::start(&[&format!("127.0.0.1:{port}")], &[], true);
    for command in [2u8, 3] {
        let mut stream = proxy.connect();
        send(&mut stream, &[5, 1, 0]);
        let mut choice = [0u8; 2];
        stream
            .read_exact(&mut choice)
            .unwrap_or_else(|e| panic!("method choice: {e}"));
        send(&mut stream, &[5, command, 0, 1, 127, 0, 0, 1]);
        send(&mut stream, &port.to_be_bytes());
        let mut reply = [0u8; 2];
        stream
            .read_exact(&mut reply)
            .unwrap_or_else(|e| panic!("reply: {e}"));
        assert_eq!(reply, [5, 7], "command {command} is not supported");
    }
    let (_, code) = socks_connect(&proxy, &domain("Other.Example."), 443);
    assert_eq!(code, 2, "an unlisted host is not allowed by the ruleset");
    let mut ipv6 = vec![4];
    ipv6.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    let (_, code) = socks_connect(&proxy, &ipv6, port);
    assert_eq!(code, 2, "an unlisted address is not allowed by the ruleset");
    let refusals = proxy.refusals();
    assert_eq!(
        refusals[0],
        Refusal {
            host: "other.example".into(),
            port: 443,
            reason: "other.example:443 is not an allowed host (--allow-host other.example:443)"
                .into(),
            listable: true,
        }
    );
    assert_eq!(refusals[1].allow_pattern(), format!("[::1]:{port}"));
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert!(upstream.saw_nothing());
    proxy.stop();
}

#[test]
fn unlisted_host_gets_403_after_the_refusal_is_reported() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let other = port.wrapping_add(1).max(1);
    let proxy = Proxy::start(&[&format!("127.0.0.1:{port}")], &[], true);

    let answer = proxy.exchange(&get(&format!("http://127.0.0.1:{other}/"), "127.0.0.1"));
    // The refusal is recorded 300 ms into the callback: it is there as soon as the client
    // has its answer only because the callback ran before the answer was written.
    let refusals = proxy.refusals();
    assert!(status(&answer).contains(" 403 "), "{answer}");
    assert_eq!(
        body(&answer),
        format!(
            "sandgate proxy: 127.0.0.1:{other} is not an allowed host \
             (--allow-host 127.0.0.1:{other})\n"
        )
    );
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{answer}"
    );
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!((refusals[0].port, refusals[0].listable), (other, true));
    assert_eq!(refusals[0].allow_pattern(), format!("127.0.0.1:{other}"));

    let mut stream = proxy.connect();
    send(
        &mut stream,
        b"CONNECT Other.Example.:443 HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let head = read_head(&mut stream).unwrap_or_else(|| panic!("no answer to CONNECT"));
    assert!(status(&head).contains(" 403 "), "{head}");
    let refusals = proxy.refusals();
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert_eq!(refusals[1].allow_pattern(), "other.example:443");
    assert!(upstream.saw_nothing());
    proxy.stop();
}

#[test]
fn denied_host_gets_403_even_when_allowed() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let listed = format!("127.0.0.1:{port}");
    let proxy = Proxy::start(&[&listed], &[&listed], true);
    let answer = proxy.exchange(&get(&format!("http://{listed}/"), &listed));
    assert!(status(&answer).contains(" 403 "), "{answer}");
    assert!(body(&answer).contains("denied"), "{answer}");
    let refusals = proxy.refusals();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(
        !refusals[0].listable,
        "a denial cannot be lifted with --allow-host"
    );
    assert!(upstream.saw_nothing());
    proxy.stop();
}

#[test]
fn private_destinations_need_allow_private() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let proxy = Proxy::start(
        &[&format!("127.0.0.1:{port}"), &format!("localhost:{port}")],
        &[],
        false,
    );
    let answer = proxy.exchange(&get(&format!("http://127.0.0.1:{port}/"), "127.0.0.1"));
    assert!(status(&answer).contains(" 403 "), "{answer}");
    assert!(
        body(&answer).contains("127.0.0.1 resolves only to addresses the proxy does not connect to: 127.0.0.1 (private)"),
        "{answer}"
    );
    assert!(body(&answer).contains("--allow-private-hosts"), "{answer}");
    // A listed name is judged by what it resolves to.
    let answer = proxy.exchange(&get(&format!("http://localhost:{port}/"), "localhost"));
    assert!(status(&answer).contains(" 403 "), "{answer}");
    assert!(
        body(&answer)
            .contains("localhost resolves only to addresses the proxy does not connect to"),
        "{answer}"
    );
    let (_, code) = socks_connect(&proxy, &domain("localhost"), port);
    assert_eq!(code, 2, "SOCKS: not allowed by the ruleset");
    let refusals = proxy.refusals();
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    assert!(
        refusals.iter().all(|r| !r.listable && r.port == port),
        "{refusals:?}"
    );
    assert!(upstream.saw_nothing());
    proxy.stop();
}

#[test]
fn non_proxy_requests_get_400_with_one_line() {
    let proxy = Proxy::start(&["example.com"], &[], false);
    for (request, says) in [
        (get("/", "127.0.0.1"), "proxy requests"),
        (get("https://example.com/", "example.com"), "CONNECT"),
        (
            get("ftp://example.com/", "example.com"),
            "http:// URLs only",
        ),
        (
            "CONNECT example.com HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_string(),
            "host:port",
        ),
    ] {
        let answer = proxy.exchange(&request);
        assert!(status(&answer).contains(" 400 "), "{request}: {answer}");
        assert!(body(&answer).contains(says), "{request}: {answer}");
        assert_eq!(body(&answer).lines().count(), 1, "{answer}");
    }
    let answer = proxy.exchange("\x16\x03\x01 not http at all\r\n\r\n");
    assert!(status(&answer).contains(" 400 "), "{answer}");
    assert!(proxy.refusals().is_empty());
    proxy.stop();
}

#[test]
fn unreachable_upstream_is_a_gateway_error_not_a_refusal() {
    // A port that was just free: nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let proxy = Proxy::start(&[&format!("127.0.0.1:{closed}")], &[], true);
    let answer = proxy.exchange(&get(&format!("http://127.0.0.1:{closed}/"), "127.0.0.1"));
    assert!(status(&answer).contains(" 502 "), "{answer}");
    assert!(body(&answer).contains("cannot connect"), "{answer}");
    let (_, code) = socks_connect(&proxy, &[1, 127, 0, 0, 1], closed);
    assert_eq!(code, 5, "SOCKS: connection refused");
    assert!(proxy.refusals().is_empty());
    proxy.stop();
}

#[test]
fn run_ends_on_hang_up_but_not_on_readable_fd() {
    let upstream = Upstream::start();
    let port = upstream.port;
    let mut proxy = Proxy::start(&[&format!("127.0.0.1:{port}")], &[], true);
    // A readable fd (as a seccomp listener with a notification waiting is) is no hang-up.
    let writer = proxy
        .hang_up
        .take()
        .unwrap_or_else(|| panic!("no write end"));
    let mut writer = std::fs::File::from(writer);
    writer
        .write_all(b"x")
        .unwrap_or_else(|e| panic!("pipe write: {e}"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        proxy.thread.as_ref().is_some_and(|t| !t.is_finished()),
        "run ended on a readable fd"
    );
    let answer = proxy.exchange(&get(&format!("http://127.0.0.1:{port}/"), "127.0.0.1"));
    assert!(status(&answer).contains(" 200 "), "{answer}");
    proxy.hang_up = Some(OwnedFd::from(writer));
    proxy.stop();
}
