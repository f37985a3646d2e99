//! A real `sandgate approvals serve` for tests, at the default socket of a test's own
//! runtime directory (the `XDG_RUNTIME_DIR` that `TestEnv::isolate` sets), stopped when
//! dropped.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{output, sandgate, TestEnv};

pub struct ApprovalsServer {
    child: Child,
    /// Where it listens.
    pub socket: PathBuf,
    /// The panel's URL (with its token), when started with `--http`.
    pub url: Option<String>,
    stderr: PathBuf,
}

impl ApprovalsServer {
    /// Starts a server with `args` (besides the socket, which is the default one).
    pub fn start(env: &TestEnv, args: &[&str]) -> ApprovalsServer {
        let stderr = env.root.join(format!("server-{}.err", std::process::id()));
        let mut cmd = Command::new(sandgate());
        env.isolate(&mut cmd);
        cmd.args(["approvals", "serve"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the server: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut lines = BufReader::new(stdout).lines();
        let mut url = None;
        let socket = loop {
            let line = lines.next().and_then(Result::ok).unwrap_or_else(|| {
                panic!(
                    "the server printed no socket line: {}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                )
            });
            if let Some(path) = line.strip_prefix("socket: ") {
                break PathBuf::from(path);
            }
            assert!(url.is_none(), "the URL is the first line only: {line}");
            url = Some(line);
        };
        ApprovalsServer {
            child,
            socket,
            url,
            stderr,
        }
    }

    /// A server whose socket lies beneath the workspace, where sandboxed commands may
    /// connect: what a sandbox's supervisor reaches on its behalf.
    pub fn beneath_the_workspace(env: &TestEnv) -> ApprovalsServer {
        let socket = env.ws.join("private/approvals.sock");
        ApprovalsServer::start(env, &["--socket", &socket.to_string_lossy()])
    }

    /// `unix:<socket>`, for `--approval-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    /// `sandgate approvals ARGS --socket <this server's>`.
    pub fn client(&self, env: &TestEnv, args: &[&str]) -> Output {
        let mut cmd = Command::new(sandgate());
        env.isolate(&mut cmd);
        cmd.arg("approvals")
            .args(args)
            .arg("--socket")
            .arg(&self.socket);
        output(&mut cmd)
    }

    /// The board, from `approvals list --json`.
    pub fn board(&self, env: &TestEnv) -> Value {
        let out = self.client(env, &["list", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", super::show(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", super::show(&out)))
    }

    /// Waits (up to 20 s) until `n` questions are pending, and returns them.
    pub fn pending(&self, env: &TestEnv, n: usize) -> Vec<Value> {
        self.board_until(env, |b| {
            b["pending"].as_array().is_some_and(|p| p.len() == n)
        })["pending"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits (up to 20 s) for exactly one pending question, and returns its id.
    pub fn only_pending_id(&self, env: &TestEnv) -> String {
        self.pending(env, 1)[0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits (up to 20 s) until `done` holds for the board, and returns it.
    pub fn board_until(&self, env: &TestEnv, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let board = self.board(env);
            if done(&board) {
                return board;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the board never got there: {board:#}\nserver: {}",
                self.errors()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server said on stderr.
    pub fn errors(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for ApprovalsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The escalating call most tests make: `touch ws/<file>` under read-only, asking for
/// workspace-write with `why` (and `extra` flags, an endpoint say), waiting for its
/// answer up to 60 s unless `extra` sets `--approval-timeout`. Start it with `.spawn()`,
/// or run it with `output`.
pub fn asker(env: &TestEnv, file: &str, why: &str, extra: &[&str]) -> Command {
    let mut cmd = env.sandgate("read-only");
    cmd.args([
        "--sandbox-permissions",
        "workspace-write",
        "--justification",
        why,
    ])
    .args(extra);
    if !extra.contains(&"--approval-timeout") {
        cmd.args(["--approval-timeout", "60"]);
    }
    cmd.args(["--", "touch"])
        .arg(env.ws.join(file))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for a started call to end (at most 20 s) and returns how.
pub fn ended(child: Child) -> Output {
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let start = Instant::now();
    while !waiter.is_finished() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the call did not end after its answer");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match waiter.join() {
        Ok(Ok(out)) => out,
        other => panic!("{other:?}"),
    }
}
