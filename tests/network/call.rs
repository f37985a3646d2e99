//! Running a command in a `workspace-write` sandbox with allowed hosts, and reading what
//! curl and the markers say about it.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::registry::without_host_proxies;
use crate::support::*;

/// Where sandgate's proxy listens inside every sandbox with allowed hosts.
pub const PROXY: &str = "127.0.0.1:3128";

/// What one sandboxed call did: its output and the denial markers of its `--denial-log`.
pub struct Call {
    pub out: Output,
    pub markers: Vec<Value>,
}

impl Call {
    /// The markers with `op: "network"`.
    pub fn network_markers(&self) -> Vec<&Value> {
        self.markers
            .iter()
            .filter(|m| m["op"] == "network")
            .collect()
    }

    /// Asserts that the call left no network marker (an allowed request is not a denial).
    #[track_caller]
    pub fn assert_no_network_marker(&self) {
        assert!(
            self.network_markers().is_empty(),
            "unexpected network markers {:?}\n{}",
            self.network_markers(),
            show(&self.out)
        );
    }

    /// Asserts a proxy refusal of `host`:`port`: a network marker naming both in the log,
    /// and on stderr too when the command failed (stderr shows markers only then).
    #[track_caller]
    pub fn assert_host_refused(&self, host: &str, port: u16) -> Value {
        let wanted = |m: &Value| m["op"] == "network" && m["host"] == host && m["port"] == port;
        let marker = self
            .markers
            .iter()
            .find(|m| wanted(m))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "no network marker for {host}:{port} in {:?}\n{}",
                    self.markers,
                    show(&self.out)
                )
            });
        if self.out.status.code() != Some(0) {
            assert!(
                stderr_markers(&self.out).iter().any(wanted),
                "the failed command's stderr shows no marker for {host}:{port}\n{}",
                show(&self.out)
            );
        }
        marker
    }

    /// Like [`Call::assert_host_refused`] for a host the allowlist does not name: the marker
    /// also says which `--allow-host` would allow it.
    #[track_caller]
    pub fn assert_unlisted(&self, host: &str, port: u16) -> Value {
        let marker = self.assert_host_refused(host, port);
        assert_eq!(
            marker["allow"],
            serde_json::json!(["--allow-host", format!("{host}:{port}")]),
            "{marker}"
        );
        marker
    }

    /// Asserts a refused direct connection to `addr` (bypassing the proxy): a network
    /// marker naming the address.
    #[track_caller]
    pub fn assert_connect_refused(&self, addr: &str) {
        assert!(
            self.markers
                .iter()
                .any(|m| m["op"] == "network" && m["addr"] == addr),
            "no network marker for a connect to {addr} in {:?}\n{}",
            self.markers,
            show(&self.out)
        );
    }

    /// What [`curl`] printed: the body, the HTTP status and the proxy's answer to CONNECT
    /// (0 when there was none).
    pub fn curl(&self) -> Curled {
        let stdout = String::from_utf8_lossy(&self.out.stdout).into_owned();
        let (body, last) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
        let mut words = last.split_whitespace();
        let (status, connect) = match (words.next(), words.next(), words.next(), words.next()) {
            (Some("status"), Some(s), Some("connect"), Some(c)) => {
                (s.parse().unwrap_or_default(), c.parse().unwrap_or_default())
            }
            _ => panic!("curl printed no status line\n{}", show(&self.out)),
        };
        Curled {
            body: body.to_owned(),
            status,
            connect,
        }
    }

    /// Asserts that curl fetched `path` from the `/t/` upstream with 200.
    #[track_caller]
    pub fn assert_fetched(&self, path: &str) {
        assert_status(&self.out, 0);
        let curled = self.curl();
        assert_eq!(
            (curled.status, curled.body.as_str()),
            (200, format!("served {path}").as_str()),
            "{}",
            show(&self.out)
        );
    }
}

/// What curl printed, see [`Call::curl`].
#[derive(Debug)]
pub struct Curled {
    pub body: String,
    pub status: u16,
    pub connect: u16,
}

/// `curl` with bounded waits, printing the body and then `status N connect N` on a line of
/// its own; `args` go before the URL.
pub fn curl(args: &[&str], url: &str) -> Vec<String> {
    let mut argv: Vec<String> = [
        "curl",
        "-sS",
        "--connect-timeout",
        "10",
        "--max-time",
        "30",
        "-w",
        "\nstatus %{http_code} connect %{http_connect}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.push(url.to_owned());
    argv
}

/// `--allow-host` for each of `hosts`, and `--allow-private-hosts` when `private`.
pub fn allow(hosts: &[&str], private: bool) -> Vec<String> {
    let mut flags = Vec::new();
    for host in hosts {
        flags.extend(["--allow-host".to_owned(), host.to_string()]);
    }
    if private {
        flags.push("--allow-private-hosts".to_owned());
    }
    flags
}

/// The sandgate command for `argv` under workspace-write with `flags` and a denial log at
/// `log`, with the host's proxy variables removed.
pub fn command<S: AsRef<OsStr>>(
    env: &TestEnv,
    flags: &[String],
    log: &Path,
    argv: &[S],
) -> Command {
    let mut cmd = env.sandgate("workspace-write");
    without_host_proxies(&mut cmd);
    cmd.args(flags)
        .arg("--denial-log")
        .arg(log)
        .arg("--")
        .args(argv);
    cmd
}

/// Runs `argv` under workspace-write with `flags` (see [`allow`]).
pub fn sandboxed<S: AsRef<OsStr>>(env: &TestEnv, flags: &[String], argv: &[S]) -> Call {
    run(env, command(env, flags, &denial_log(env), argv))
}

/// Runs a prepared [`command`] whose denial log is [`denial_log`].
pub fn run(env: &TestEnv, mut cmd: Command) -> Call {
    let log = denial_log(env);
    let _ = std::fs::remove_file(&log);
    let out = output(&mut cmd);
    let markers = read_markers(&log)
        .into_iter()
        .filter(|m| m["kind"] == "sandbox_denial")
        .collect();
    let _ = std::fs::remove_file(&log);
    Call { out, markers }
}

/// The denial log of this test's calls (one call at a time; [`run`] clears it).
pub fn denial_log(env: &TestEnv) -> std::path::PathBuf {
    env.root.join("denials.ndjson")
}
