//! The browser panel of `sandgate approvals serve --http`, driven through WebDriver by a
//! headless Chromium: questions from real escalating sandgate calls appear without a reload,
//! the panel's buttons decide them, request text stays text, and the HTTP side refuses
//! requests without the token, with a foreign `Host`, or deciding by GET.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::server::ApprovalsServer;
use support::webdriver::Browser;
use support::*;

/// A justification that would run script if the panel inserted it as markup.
const HOSTILE: &str = r#"<script>window.pwned=1</script><img src=x onerror="window.pwned=2">"#;

const SOON: Duration = Duration::from_secs(20);

/// A running `sandgate approvals serve --http 127.0.0.1:0` (at the test's default socket),
/// with what its panel URL says.
struct Server {
    server: ApprovalsServer,
    /// The panel URL it printed first, token included.
    url: String,
    /// `127.0.0.1:PORT`.
    addr: String,
    token: String,
}

impl Server {
    fn start(env: &TestEnv) -> Server {
        let server = ApprovalsServer::start(env, &["--http", "127.0.0.1:0"]);
        let url = server
            .url
            .clone()
            .unwrap_or_else(|| panic!("no panel URL: {}", server.errors()));
        let (addr, token) = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once("/?token="))
            .unwrap_or_else(|| panic!("first line is not the panel URL: {url:?}"));
        assert!(addr.starts_with("127.0.0.1:"), "panel URL {url:?}");
        assert!(
            token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()),
            "token {token:?}"
        );
        Server {
            addr: addr.to_owned(),
            token: token.to_owned(),
            url,
            server,
        }
    }

    /// The endpoint an escalating call is pointed at.
    fn endpoint(&self) -> String {
        format!("unix:{}", self.server.socket.display())
    }

    /// A raw HTTP/1.1 request to the panel port: `head` is the request line and any
    /// headers after `Host` (which is `host`); returns the status, headers and body.
    fn raw(&self, host: &str, head: &str, body: &str) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(SOON)).unwrap();
        let (line, headers) = head.split_once("\r\n").unwrap_or((head, ""));
        let request = format!(
            "{line}\r\nHost: {host}\r\n{headers}{}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            if headers.is_empty() || headers.ends_with("\r\n") { "" } else { "\r\n" },
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        stream
            .read_to_string(&mut reply)
            .unwrap_or_else(|e| panic!("reading the reply to {line}: {e}"));
        let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {reply:?}"));
        (status, head.to_owned(), body.to_owned())
    }

    /// The board, as the panel reads it.
    fn board(&self) -> Value {
        let (status, _, body) = self.raw(
            &self.addr,
            &format!(
                "GET /api/questions HTTP/1.1\r\nX-Sandgate-Token: {}",
                self.token
            ),
            "",
        );
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("board {body:?}: {e}"))
    }

    /// The pending question whose justification is `justification`, waiting for it.
    fn pending(&self, justification: &str) -> Value {
        let deadline = Instant::now() + SOON;
        loop {
            let board = self.board();
            let found = board["pending"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|q| q["requested"]["justification"] == justification);
            if let Some(q) = found {
                return q.clone();
            }
            assert!(Instant::now() < deadline, "no pending question: {board}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The id of the pending question whose justification is `justification`.
    fn pending_id(&self, justification: &str) -> String {
        let question = self.pending(justification);
        question["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id: {question}"))
            .to_owned()
    }

    /// The state the board gives question `id` now.
    fn state_of(&self, id: &str) -> String {
        let board = self.board();
        ["pending", "decided"]
            .iter()
            .flat_map(|list| board[list].as_array().cloned().unwrap_or_default())
            .find(|q| q["id"] == id)
            .map(|q| q["state"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("{id} is not on the board: {board}"))
    }

    /// Decides `id` over HTTP as the panel does.
    fn decide(&self, id: &str, decision: &str) -> (u16, String) {
        let (status, _, body) = self.raw(
            &self.addr,
            &format!(
                "POST /api/questions/{id} HTTP/1.1\r\nX-Sandgate-Token: {}\r\nContent-Type: application/json",
                self.token
            ),
            &json!({ "decision": decision }).to_string(),
        );
        (status, body)
    }
}

fn kill_group(child: &mut Child) {
    let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
    let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
}

/// An escalating sandgate call waiting in the background for the server's answer; killed
/// (with its process group) if the test ends before it does.
struct Asker(Option<Child>);

impl Asker {
    /// Runs `argv` under read-only in `workspace`, asking the server for workspace-write.
    fn start(
        env: &TestEnv,
        server: &Server,
        workspace: &Path,
        justification: &str,
        argv: &[&str],
    ) -> Asker {
        let mut cmd = env.sandgate_without_workspace("read-only");
        cmd.current_dir(workspace)
            .arg("--workspace")
            .arg(workspace)
            .args([
                "--sandbox-permissions",
                "workspace-write",
                "--justification",
            ])
            .arg(justification)
            .arg("--approval-endpoint")
            .arg(server.endpoint())
            .arg("--")
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        Asker(Some(
            cmd.spawn()
                .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}")),
        ))
    }

    /// Waits for the call to end.
    fn finish(mut self) -> Output {
        let mut child = self.0.take().unwrap_or_else(|| panic!("finished twice"));
        let deadline = Instant::now() + SOON;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                kill_group(&mut child);
                panic!("the escalating call did not end after the panel's answer");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().unwrap()
    }
}

impl Drop for Asker {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            kill_group(child);
        }
    }
}

/// The panel's card for question `id`.
fn card(id: &str) -> String {
    format!("#pending .question[data-id=\"{id}\"]")
}

/// The panel's `allow` or `reject` button of question `id`, once it takes clicks (a button
/// that has just appeared or moved waits a moment first).
fn button(id: &str, which: &str) -> String {
    format!("{} button.{which}:enabled", card(id))
}

/// The panel's row for question `id` in the recent decisions, in `state`.
fn decided_row(id: &str, state: &str) -> String {
    format!("#decided tr.decision[data-id=\"{id}\"][data-state=\"{state}\"]")
}

/// Opens the panel and marks the page, so a later check can tell it was never reloaded.
fn open_panel(browser: &Browser, server: &Server) {
    browser.goto(&server.url);
    browser.wait_for("#connection.live", SOON);
    browser.execute("window.sandgateTestMark = 'same page'", &[]);
}

fn assert_not_reloaded(browser: &Browser) {
    assert_eq!(
        browser.execute("return window.sandgateTestMark", &[]),
        "same page",
        "the panel was reloaded"
    );
}

#[test]
fn allow_once_in_the_panel_runs_the_waiting_call_and_request_text_stays_text() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let browser = Browser::start(&test_base(), 1000, 800);
    open_panel(&browser, &server);
    browser.wait_for("#pending-empty:not([hidden])", SOON);

    let asker = Asker::start(
        &env,
        &server,
        &env.ws,
        HOSTILE,
        &["sh", "-c", "echo hi > file"],
    );
    let question = browser.wait_for("#pending .question", SOON);
    assert_not_reloaded(&browser);
    let id = browser.execute(
        "return document.querySelector('#pending .question').dataset.id",
        &[],
    );
    let id = id.as_str().unwrap_or_default().to_owned();
    assert_eq!(server.pending_id(HOSTILE), id);

    // What the call asks, shown as text: the markup in the justification is its letters.
    let field =
        |name: &str| browser.text(&browser.wait_for(&format!("{} .{name}", card(&id)), SOON));
    assert_eq!(field("justification"), HOSTILE);
    assert_eq!(field("command"), "sh -c 'echo hi > file'");
    assert_eq!(field("cwd"), env.ws.display().to_string());
    assert_eq!(field("workspace"), env.ws.display().to_string());
    assert_eq!(field("standing"), "read-only");
    assert_eq!(field("requested"), "workspace-write");
    assert!(field("left").ends_with(" left"), "{}", field("left"));
    assert_eq!(
        browser.execute(
            "return [typeof window.pwned, document.querySelectorAll('main script, main img').length]",
            &[]
        ),
        json!(["undefined", 0]),
        "the justification became markup"
    );
    // Age and time left tick without the server.
    let before = field("age");
    std::thread::sleep(Duration::from_millis(2100));
    assert_ne!(field("age"), before, "the age does not tick");
    assert!(browser.text(&question).contains("Allow once"));

    browser.click(&browser.wait_for(&button(&id, "allow"), SOON));
    let out = asker.finish();
    assert_status(&out, 0);
    assert_eq!(
        std::fs::read_to_string(env.ws.join("file")).unwrap(),
        "hi\n"
    );

    // Decided, live and after a reload (the server holds the state).
    for reload in [false, true] {
        if reload {
            browser.goto(&server.url);
        } else {
            assert_not_reloaded(&browser);
        }
        let row = browser.wait_for(&decided_row(&id, "allowed-once"), SOON);
        let text = browser.text(&row);
        assert!(
            text.contains("allowed-once") && text.contains("panel"),
            "{text}"
        );
        assert!(text.contains("sh -c 'echo hi > file'"), "{text}");
        browser.wait_gone("#pending .question", SOON);
    }
    assert_eq!(server.state_of(&id), "allowed-once");
}

#[test]
fn reject_in_the_panel_exits_77_and_a_late_answer_shows_an_error() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let browser = Browser::start(&test_base(), 1000, 800);
    open_panel(&browser, &server);

    let asker = Asker::start(
        &env,
        &server,
        &env.ws,
        "write a file",
        &["sh", "-c", "echo hi > file"],
    );
    let id = server.pending_id("write a file");
    browser.click(&browser.wait_for(&button(&id, "reject"), SOON));
    assert_status(&asker.finish(), 77);
    assert!(!env.ws.join("file").exists(), "a rejected call ran");
    browser.wait_for(&decided_row(&id, "rejected"), SOON);
    assert_not_reloaded(&browser);

    // A question answered elsewhere between the panel's last look and the click: the
    // answer comes first (the page's script is blocked while it is sent, so no update can
    // come in between), the panel's click is refused and the panel says so.
    let asker = Asker::start(
        &env,
        &server,
        &env.ws,
        "write it again",
        &["sh", "-c", "echo hi > file"],
    );
    let id = server.pending_id("write it again");
    browser.wait_for(&button(&id, "allow"), SOON);
    let first = browser.execute(
        "const [id, token] = arguments;
         const xhr = new XMLHttpRequest();
         xhr.open('POST', '/api/questions/' + id, false);
         xhr.setRequestHeader('X-Sandgate-Token', token);
         xhr.setRequestHeader('Content-Type', 'application/json');
         xhr.send(JSON.stringify({decision: 'rejected'}));
         document.querySelector('#pending .question[data-id=\"' + id + '\"] button.allow').click();
         return xhr.status;",
        &[json!(id), json!(server.token)],
    );
    assert_eq!(first, 200);
    let error = browser.wait_for("#error:not([hidden])", SOON);
    let shown = browser.text(&error);
    assert!(
        shown.contains("Could not allow") && shown.contains("409"),
        "{shown}"
    );
    assert_status(&asker.finish(), 77);
    assert!(!env.ws.join("file").exists(), "a rejected call ran");
    assert_eq!(server.state_of(&id), "rejected");
    browser.wait_for(&decided_row(&id, "rejected"), SOON);

    // The server gone: the panel says so.
    drop(server);
    let error = browser.wait_for("#connection.down", SOON);
    assert_eq!(browser.text(&error), "disconnected");
    let shown = browser.text(&browser.wait_for("#error:not([hidden])", SOON));
    assert!(shown.contains("Cannot reach"), "{shown}");
}

#[test]
fn a_click_aimed_at_a_question_that_just_left_does_not_allow_the_one_that_moved_up() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let browser = Browser::start(&test_base(), 1000, 800);
    open_panel(&browser, &server);

    // The first question is one a person would allow; the one below it is not.
    let harmless = Asker::start(&env, &server, &env.ws, "list the files", &["ls"]);
    let first = server.pending_id("list the files");
    browser.wait_for(&card(&first), SOON);
    let risky = Asker::start(
        &env,
        &server,
        &env.ws,
        "tidy up",
        &["sh", "-c", "echo gone > erased"],
    );
    let second = server.pending_id("tidy up");
    browser.wait_for(&button(&first, "allow"), SOON);
    browser.wait_for(&button(&second, "allow"), SOON);

    // The pointer rests on the first question's Allow once; its asker gives up just before
    // the click (its card leaves, the second moves up under the pointer).
    let place = browser.execute(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();
         return [Math.round(r.left + r.width / 2), Math.round(r.top + r.height / 2)];",
        &[json!(format!("{} button.allow", card(&first)))],
    );
    let (x, y) = (
        place[0].as_i64().unwrap_or(0),
        place[1].as_i64().unwrap_or(0),
    );
    browser.execute(
        "window.sandgateLeft = null;
         new MutationObserver(() => {
           if (!document.querySelector(arguments[0]) && window.sandgateLeft === null)
             window.sandgateLeft = performance.now();
         }).observe(document.getElementById('pending'), {childList: true});",
        &[json!(card(&first))],
    );
    drop(harmless);
    let deadline = Instant::now() + SOON;
    while browser.execute("return window.sandgateLeft", &[]).is_null() {
        assert!(Instant::now() < deadline, "the first question never left");
        std::thread::sleep(Duration::from_millis(10));
    }
    browser.click_at(x, y);
    let late = browser.execute("return performance.now() - window.sandgateLeft", &[]);
    assert!(
        late.as_f64().is_some_and(|ms| ms < 900.0),
        "the click came {late} ms after the card left: too slow to show anything"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        server.state_of(&second),
        "pending",
        "a click aimed at a question that had just left allowed the one that moved there"
    );
    assert!(!env.ws.join("erased").exists());

    // The control: once it has stayed put, the same click is the second question's.
    browser.wait_for(&button(&second, "allow"), SOON);
    browser.click_at(x, y);
    assert_status(&risky.finish(), 0);
    assert_eq!(server.state_of(&second), "allowed-once");
}

#[test]
fn a_request_that_names_another_host_anywhere_is_refused() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let ours = server.addr.clone();
    let token = format!("X-Sandgate-Token: {}", server.token);
    let refused = [
        // An absolute-form target names the host HTTP goes by, whatever `Host` says.
        format!("GET http://rebound.example/api/questions HTTP/1.1\r\n{token}"),
        // Two `Host` headers: which one counts depends on who reads them.
        format!("GET /api/questions HTTP/1.1\r\nHost: rebound.example\r\n{token}"),
    ];
    for head in &refused {
        let (status, _, body) = server.raw(&ours, head, "");
        assert_eq!(status, 403, "{head}: {body}");
    }
    // The control: the same target naming the panel itself.
    let (status, _, body) = server.raw(
        &ours,
        &format!("GET http://{ours}/api/questions HTTP/1.1\r\n{token}"),
        "",
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn http_refuses_requests_without_the_token_with_a_foreign_host_or_deciding_by_get() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let asker = Asker::start(
        &env,
        &server,
        &env.ws,
        "write a file",
        &["sh", "-c", "echo hi > file"],
    );
    let id = server.pending_id("write a file");
    let token = format!("X-Sandgate-Token: {}", server.token);
    let home = server.addr.clone();
    let evil = server.addr.replace("127.0.0.1", "evil.example");
    let local = server.addr.replace("127.0.0.1", "localhost");
    let board = "GET /api/questions HTTP/1.1";
    let page_with = |token: &str| format!("GET /?token={token} HTTP/1.1");
    let decide = format!("POST /api/questions/{id} HTTP/1.1\r\nContent-Type: application/json");
    let (read_ok, decide_ok) = (
        format!("{board}\r\n{token}"),
        format!("{decide}\r\n{token}"),
    );
    let allow = r#"{"decision":"allowed-once"}"#;

    // Controls: with the token and the loopback Host, the page and the board are served,
    // the page with a fresh nonce in its CSP and on its script.
    let (status, head, page) = server.raw(&home, &page_with(&server.token), "");
    assert_eq!(status, 200, "{head}");
    let csp = head
        .lines()
        .find(|l| {
            l.to_ascii_lowercase()
                .starts_with("content-security-policy:")
        })
        .unwrap_or_else(|| panic!("no CSP: {head}"));
    let nonce = csp
        .split("script-src 'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("no script nonce in {csp}"));
    assert!(
        page.contains(&format!("<script nonce=\"{nonce}\">")),
        "{csp}"
    );
    assert!(!page.contains("{{NONCE}}"));
    assert_eq!(server.raw(&home, &read_ok, "").0, 200);

    let wrong = format!("X-Sandgate-Token: {}", "0".repeat(32));
    let decide_wrong = format!("{decide}\r\n{wrong}");
    let refused = [
        ("no token", &home, board.to_owned(), ""),
        ("no token, page", &home, "GET / HTTP/1.1".to_owned(), ""),
        ("wrong token", &home, format!("{board}\r\n{wrong}"), ""),
        ("wrong token, page", &home, page_with(&"0".repeat(32)), ""),
        ("foreign Host", &evil, read_ok.clone(), ""),
        ("foreign Host, page", &evil, page_with(&server.token), ""),
        ("localhost as Host", &local, read_ok.clone(), ""),
        ("decision without token", &home, decide, allow),
        ("decision, wrong token", &home, decide_wrong, allow),
        ("decision, foreign Host", &evil, decide_ok, allow),
    ];
    for (what, host, head, body) in &refused {
        let (status, _, reply) = server.raw(host, head, body);
        assert_eq!(status, 403, "{what}: {reply}");
        assert!(!reply.contains(&id), "{what} leaked the board: {reply}");
    }
    let (status, _, reply) = server.raw(
        &server.addr,
        &format!("GET /api/questions/{id} HTTP/1.1\r\n{token}"),
        "",
    );
    assert_eq!(status, 405, "GET of a decision: {reply}");
    // The panel names a question by its whole id, at exactly its route; and only the two
    // decisions exist.
    for (what, path, decision) in [
        ("the start of the id", id[..8].to_owned(), "allowed-once"),
        ("a longer path", format!("x/{id}"), "allowed-once"),
        ("another decision", id.clone(), "allow_always"),
    ] {
        let (status, reply) = server.decide(&path, decision);
        assert!([400, 404].contains(&status), "{what}: {status} {reply}");
    }
    assert_eq!(server.state_of(&id), "pending", "a refused request decided");

    // Control: the proper POST decides, and the call runs.
    let (status, reply) = server.decide(&id, "allowed-once");
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        serde_json::from_str::<Value>(&reply).unwrap_or_else(|e| panic!("{reply:?}: {e}")),
        json!({"id": id, "decision": "allowed-once"})
    );
    assert_status(&asker.finish(), 0);
    assert!(env.ws.join("file").exists());
    let (status, _) = server.decide(&id, "rejected");
    assert_eq!(status, 409, "a second answer");
}

/// The screenshot in the README: one decided and one pending question. It is written to
/// the file `SANDGATE_PANEL_SCREENSHOT` names (docs/approvals-panel.png when regenerating);
/// without it the image is taken and checked, and left in the test's directory.
#[test]
fn screenshot_of_a_pending_question() {
    let env = TestEnv::new();
    let project = env.root.join("webapp");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(
        project.join("Makefile"),
        "dist:\n\tmkdir -p dist && echo built > dist/app.txt\n",
    )
    .unwrap();
    let server = Server::start(&env);
    let browser = Browser::start(&test_base(), 960, 640);
    open_panel(&browser, &server);

    let earlier = "Delete the stale build cache";
    let asker = Asker::start(
        &env,
        &server,
        &project,
        earlier,
        &["rm", "-rf", "target/cache"],
    );
    let id = server.pending_id(earlier);
    browser.click(&browser.wait_for(&button(&id, "reject"), SOON));
    assert_status(&asker.finish(), 77);
    browser.wait_for(&decided_row(&id, "rejected"), SOON);

    let why = "Build the release bundle into dist/ so the deploy step can pick it up";
    let asker = Asker::start(&env, &server, &project, why, &["make", "dist"]);
    let id = server.pending_id(why);
    browser.wait_for(&button(&id, "allow"), SOON);
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    assert!(width > 400, "screenshot {width} pixels wide");
    let target = std::env::var_os("SANDGATE_PANEL_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| env.root.join("approvals-panel.png"));
    std::fs::write(&target, &png).unwrap_or_else(|e| panic!("{}: {e}", target.display()));

    browser.click(&browser.wait_for(&button(&id, "allow"), SOON));
    assert_status(&asker.finish(), 0);
    assert!(project.join("dist/app.txt").exists());
}
