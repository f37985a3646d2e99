//! A small WebDriver client: Debian's chromedriver driving a headless Chromium, spoken to
//! over ureq (a test-only HTTP client) and serde_json. The panel tests need seven
//! commands (new session, navigate, find, click, text, execute, screenshot). fantoccini
//! builds without TLS, but would add some sixty-five crates for them (two generations of
//! ICU, a second `http`, `time`, two `cookie`s) and make every browser test async.
//!
//! chromedriver runs as the leader of its own process group, and Chromium inherits that
//! group: dropping the [`Browser`] ends the session and then kills the group, so no browser
//! process outlives a test, a failing one included. (Chromium's crash handler starts a
//! session of its own; it exits when the browser it watches is gone. Turning it off with
//! `--disable-crashpad-for-testing` leaves the renderer hanging.)

#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A found element.
#[derive(Clone, Debug)]
pub struct Element(String);

/// One headless Chromium under chromedriver, with one session.
pub struct Browser {
    driver: Child,
    session: String,
    agent: ureq::Agent,
    /// HOME, the profile and chromedriver's log: a test's own, writable by whichever uid
    /// runs it (the unprivileged run has HOME=/nonexistent).
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session with a fresh
    /// profile and a `width`×`height` window.
    pub fn start(base: &Path, width: u32, height: u32) -> Browser {
        for program in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(program).exists(),
                "{program} is missing: install Debian's chromium and chromium-driver (scripts/test does, as root)"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("sandgate-browser-")
            .tempdir_in(base)
            .unwrap_or_else(|e| panic!("browser directory in {}: {e}", base.display()));
        let port = free_port();
        let log = dir.path().join("chromedriver.log");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .env("HOME", dir.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_CACHE_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}"));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut browser = Browser {
            driver,
            session: String::new(),
            agent,
            dir,
        };
        browser.wait_until_ready(port);
        let profile = browser.dir.path().join("profile");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            // A page that does not load fails the test in seconds, not chromedriver's five
            // minutes.
            "timeouts": {"pageLoad": 20000, "script": 20000},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--hide-scrollbars",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let created = browser.request(
            "POST",
            &format!("http://127.0.0.1:{port}/session"),
            Some(capabilities),
        );
        let id = created["sessionId"].as_str().unwrap_or_else(|| {
            panic!("no session from chromedriver: {created}\n{}", browser.log())
        });
        browser.session = format!("http://127.0.0.1:{port}/session/{id}");
        browser
    }

    fn wait_until_ready(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status = self
                .agent
                .get(&format!("http://127.0.0.1:{port}/status"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok())
                .and_then(|body| serde_json::from_str::<Value>(&body).ok());
            if status.is_some_and(|s| s["value"]["ready"] == true) {
                return;
            }
            if let Ok(Some(exit)) = self.driver.try_wait() {
                panic!("chromedriver exited: {exit}\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver not ready after 20 s\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// chromedriver's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("chromedriver.log")).unwrap_or_default()
    }

    /// Sends one WebDriver command and returns its `value`; a WebDriver error fails the test.
    fn request(&self, method: &str, url: &str, body: Option<Value>) -> Value {
        let (status, reply) = self.try_request(method, url, body);
        assert!(
            status == 200,
            "WebDriver {method} {url}: HTTP {status}: {reply}"
        );
        reply["value"].clone()
    }

    fn try_request(&self, method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
        let sent = match (method, body) {
            ("GET", _) => self.agent.get(url).call(),
            ("DELETE", _) => self.agent.delete(url).call(),
            (_, body) => self
                .agent
                .post(url)
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_else(|| json!({})).to_string().as_bytes()),
        };
        let mut response = sent.unwrap_or_else(|e| panic!("WebDriver {method} {url}: {e}"));
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .unwrap_or_else(|e| panic!("WebDriver {method} {url}: reading the reply: {e}"));
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("WebDriver {method} {url}: {e}: {text}"));
        (status, value)
    }

    fn session_command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.request(method, &format!("{}{path}", self.session), body)
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.session_command("POST", "/url", Some(json!({"url": url})));
    }

    /// Every element `css` matches now.
    pub fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self.session_command(
            "POST",
            "/elements",
            Some(json!({"using": "css selector", "value": css})),
        );
        found
            .as_array()
            .unwrap_or_else(|| panic!("find {css}: {found}"))
            .iter()
            .map(|e| {
                // An element reference is an object with one member, the element's id.
                let id = e
                    .as_object()
                    .and_then(|o| o.values().next())
                    .and_then(Value::as_str);
                Element(id.unwrap_or_else(|| panic!("find {css}: {e}")).to_owned())
            })
            .collect()
    }

    /// The first element `css` matches, waiting up to `timeout` for one to appear.
    pub fn wait_for(&self, css: &str, timeout: Duration) -> Element {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = self.find_all(css).into_iter().next() {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no element matches {css} after {timeout:?}; the page shows:\n{}",
                self.page_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits up to `timeout` until nothing matches `css`.
    pub fn wait_gone(&self, css: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.find_all(css).is_empty() {
            assert!(
                Instant::now() < deadline,
                "{css} still there after {timeout:?}; the page shows:\n{}",
                self.page_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Clicks `element`.
    pub fn click(&self, element: &Element) {
        self.session_command("POST", &format!("/element/{}/click", element.0), None);
    }

    /// Presses and releases the mouse's first button at (`x`, `y`) of the viewport, as a
    /// person's click there: whatever is at that point then gets it, not a chosen element.
    pub fn click_at(&self, x: i64, y: i64) {
        self.session_command(
            "POST",
            "/actions",
            Some(json!({"actions": [{
                "type": "pointer",
                "id": "mouse",
                "parameters": {"pointerType": "mouse"},
                "actions": [
                    {"type": "pointerMove", "duration": 0, "origin": "viewport", "x": x, "y": y},
                    {"type": "pointerDown", "button": 0},
                    {"type": "pointerUp", "button": 0},
                ],
            }]})),
        );
        self.session_command("DELETE", "/actions", None);
    }

    /// The text `element` shows (as rendered, so markup in it would not count as text).
    pub fn text(&self, element: &Element) -> String {
        let text = self.session_command("GET", &format!("/element/{}/text", element.0), None);
        text.as_str().unwrap_or_default().to_owned()
    }

    /// The whole page's visible text, for failure messages.
    pub fn page_text(&self) -> String {
        self.execute("return document.body ? document.body.innerText : ''", &[])
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs `script` (a function body) in the page and returns what it returns.
    pub fn execute(&self, script: &str, args: &[Value]) -> Value {
        self.session_command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let encoded = self.session_command("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("screenshot is not base64: {e}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let url = self.session.clone();
            let _ = self.agent.delete(&url).call();
        }
        let group = nix::unistd::Pid::from_raw(-(self.driver.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.driver.wait();
    }
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
