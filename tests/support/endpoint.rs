//! A real approval endpoint for tests: an HTTP server on 127.0.0.1 or on a unix socket
//! that records every request and answers with whatever the test scripts, hostile
//! replies included.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// What the endpoint answers to one request.
#[derive(Clone)]
pub enum Reply {
    /// A status and a body, sent as given.
    Http(u16, String),
    /// Bytes written raw to the connection, then closed.
    Raw(Vec<u8>),
    /// Wait, then reply.
    After(Duration, Box<Reply>),
}

impl Reply {
    /// `{"id": <the request's id>, "decision": decision}` with status 200.
    pub fn decision(request: &Value, decision: &str) -> Reply {
        Reply::Http(
            200,
            json!({"id": request["id"], "decision": decision}).to_string(),
        )
    }
}

type Responder = dyn Fn(&Value, &[Value]) -> Reply + Send + Sync;

/// A running test endpoint; it stops when dropped.
pub struct TestEndpoint {
    /// The endpoint as sandgate's `--approval-endpoint` takes it.
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    wake: Box<dyn Fn() + Send>,
}

impl TestEndpoint {
    /// Serves on 127.0.0.1 (an ephemeral port).
    pub fn http(
        respond: impl Fn(&Value, &[Value]) -> Reply + Send + Sync + 'static,
    ) -> TestEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (requests, stop) = serve(
            move || listener.accept().map(|(s, _)| Box::new(s) as Box<dyn Conn>),
            Arc::new(respond),
        );
        let wake = Box::new(move || drop(std::net::TcpStream::connect(addr)));
        TestEndpoint {
            url: format!("http://{addr}/approve"),
            requests,
            stop,
            wake,
        }
    }

    /// Serves HTTP on a unix socket at `path`.
    pub fn unix(
        path: &Path,
        respond: impl Fn(&Value, &[Value]) -> Reply + Send + Sync + 'static,
    ) -> TestEndpoint {
        let listener = UnixListener::bind(path).unwrap();
        let (requests, stop) = serve(
            move || listener.accept().map(|(s, _)| Box::new(s) as Box<dyn Conn>),
            Arc::new(respond),
        );
        let p = path.to_path_buf();
        let wake = Box::new(move || drop(std::os::unix::net::UnixStream::connect(&p)));
        TestEndpoint {
            url: format!("unix:{}", path.display()),
            requests,
            stop,
            wake,
        }
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for TestEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        (self.wake)();
    }
}

trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

fn serve(
    accept: impl Fn() -> std::io::Result<Box<dyn Conn>> + Send + 'static,
    respond: Arc<Responder>,
) -> (Arc<Mutex<Vec<Value>>>, Arc<AtomicBool>) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (r, s) = (requests.clone(), stop.clone());
    std::thread::spawn(move || loop {
        let Ok(conn) = accept() else { return };
        if s.load(Ordering::SeqCst) {
            return;
        }
        let (r, respond) = (r.clone(), respond.clone());
        std::thread::spawn(move || handle(conn, &r, &*respond));
    });
    (requests, stop)
}

fn handle(mut conn: Box<dyn Conn>, requests: &Mutex<Vec<Value>>, respond: &Responder) {
    let mut reader = BufReader::new(&mut conn);
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let earlier = {
        let Ok(mut all) = requests.lock() else { return };
        let earlier = all.clone();
        all.push(request.clone());
        earlier
    };
    let mut reply = respond(&request, &earlier);
    loop {
        match reply {
            Reply::After(delay, next) => {
                std::thread::sleep(delay);
                reply = *next;
            }
            Reply::Raw(bytes) => {
                let _ = conn.write_all(&bytes);
                return;
            }
            Reply::Http(status, body) => {
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
                    body.len(),
                    if status == 302 { "Location: http://127.0.0.1:9/\r\n" } else { "" },
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(body.as_bytes());
                return;
            }
        }
    }
}
