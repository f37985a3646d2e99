//! The reporter: what becomes of each refused operation — a marker in the denial log at
//! once, and on stderr when the call ends, if the command failed.

use super::{line, tagged, Denial, Escalation, Form, Operation, NETWORK, STDERR_CAP, WHY};
use crate::policy::Mode;

/// One `sandbox_denial` marker, as the log and stderr carry it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Marker {
    pub v: u8,
    pub kind: &'static str,
    #[serde(flatten)]
    pub what: Operation,
    pub mode: Mode,
    /// The narrowest mode that would allow the operation; `None` when the managed
    /// maximum leaves no such mode.
    pub needed: Option<Mode>,
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `None` when no request could be granted (no mode reaches it, or approval `never`).
    pub retry: Option<Retry>,
    /// Why there is no retry, and what only the user could change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The flag that allows just this socket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<(&'static str, String)>,
}

/// How to ask for the mode a refused operation needs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Retry {
    /// sandgate's own argv with the request added; `None` when the call's argv is not
    /// UTF-8, which JSON cannot carry byte for byte: a lossy copy would run other bytes (a
    /// different file, a different command) than the call that was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    pub hint: String,
    /// The directive line (a script) or the whole new command string (`-c`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directive: Option<String>,
    /// Set when the script came on stdin and must be fed again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<&'static str>,
}

/// Collects denials: each one as NDJSON in the denial log at once, the first of each
/// distinct (op, target) for stderr up to [`STDERR_CAP`], shown when the call ends — and
/// only if the command failed.
pub struct Reporter {
    mode: Mode,
    /// sandgate's own argv, for the retry (`None`: not UTF-8).
    argv: Option<Vec<String>>,
    form: Form,
    escalation: Escalation,
    log: Option<(std::fs::File, std::path::PathBuf)>,
    shown: std::collections::HashSet<(&'static str, String)>,
    held: Vec<Marker>,
    count: usize,
    /// The widest mode a retry may ask for, over every denial recorded.
    widest: Option<Mode>,
    /// The command's `TMPDIR` where the host's `/tmp` is out of its reach rather than
    /// replaced (the landlock backend): a refusal there says where temporary files go.
    temp_elsewhere: Option<std::path::PathBuf>,
}

impl Reporter {
    /// A reporter for a call running at `mode`, invoked as `argv` in `form`, logging to
    /// `log` (the open file and its path, for the closing note).
    pub fn new(
        mode: Mode,
        argv: Option<Vec<String>>,
        form: Form,
        escalation: Escalation,
        log: Option<(std::fs::File, std::path::PathBuf)>,
    ) -> Reporter {
        Reporter {
            mode,
            argv,
            form,
            escalation,
            log,
            shown: std::collections::HashSet::new(),
            held: Vec::new(),
            count: 0,
            widest: None,
            temp_elsewhere: None,
        }
    }

    /// Says that the command's temporary files go in `tmpdir`, not in the host's `/tmp`.
    pub fn temp_is_elsewhere(&mut self, tmpdir: &std::path::Path) {
        self.temp_elsewhere = Some(tmpdir.to_owned());
    }

    /// Why an operation on `path` was refused when it lies in a shared temporary
    /// directory the command does not have.
    fn temp_reason(&self, path: Option<&str>) -> Option<String> {
        let tmpdir = self.temp_elsewhere.as_ref()?;
        let path = std::path::Path::new(path?);
        let shared = ["/tmp", "/dev/shm"]
            .into_iter()
            .find(|dir| path.starts_with(dir) && !path.starts_with(tmpdir))?;
        Some(format!(
            "the host's {shared} is out of reach here (the landlock backend, without a mount namespace): this call's temporary files go in $TMPDIR, {}",
            tmpdir.display()
        ))
    }

    /// Returns the mode a retry may ask for to allow an operation that needs `needed`:
    /// `None` when the managed ceiling leaves no such mode.
    fn reachable(&self, needed: Mode) -> Option<Mode> {
        match &self.escalation {
            Escalation::Possible {
                ceiling: Some(ceiling),
            } if needed > *ceiling => None,
            _ => Some(needed),
        }
    }

    /// Returns the exact invocation that asks for `needed`.
    fn retry_argv(&self, needed: Mode) -> Option<Vec<String>> {
        let mut argv = self.argv.clone()?;
        let at = usize::from(!argv.is_empty());
        let flags = [
            "--sandbox-permissions".to_owned(),
            needed.as_str().to_owned(),
            "--justification".to_owned(),
            WHY.to_owned(),
        ];
        argv.splice(at..at, flags);
        Some(argv)
    }

    /// The retry for an operation that `needed` allows; `protection` says why only
    /// `full-access` reaches its path, when that is the reason.
    fn retry(&self, needed: Mode, protection: Option<&str>) -> Retry {
        let why = protection.map_or_else(String::new, |what| {
            format!("this is {what}; if the change is really needed, ")
        });
        let flags = format!("--sandbox-permissions {needed} --justification \"{WHY}\"");
        let line = crate::shell::directive_line(needed.as_str(), WHY);
        let (how, directive, stdin) = match &self.form {
            Form::Argv => (format!("rerun with {flags}"), None, None),
            Form::ShellCommand(command) => (
                format!("rerun with {flags}, or send the command with the directive line first"),
                Some(format!("{line}\n{command}")),
                None,
            ),
            Form::Script => (
                format!("rerun with {flags}, or put the directive line at the top of the script, after any #! line"),
                Some(line),
                None,
            ),
            Form::Stdin => (
                format!("rerun with {flags} and feed the same script on stdin again, or put the directive line at its top"),
                Some(line),
                Some("the script must be fed again on stdin"),
            ),
        };
        let argv = self.retry_argv(needed);
        let spelled = if argv.is_some() {
            ""
        } else {
            "; the command line is not UTF-8, so no argv is given: add the flags to it as it was"
        };
        Retry {
            argv,
            hint: format!("{why}{how} (replace {WHY} with the reason){spelled}"),
            directive,
            stdin,
        }
    }

    /// The marker for `d` (without the caller's tag).
    pub fn marker(&self, d: &Denial) -> Marker {
        let needed = self.reachable(d.needed);
        // Reaching one socket or host rarely needs a whole wider mode.
        let host = d.what.host.as_deref().map(|h| host_port(h, d.what.port));
        let allow = match (&d.what.path, &host) {
            (Some(path), _) if d.what.op == NETWORK => Some(("--allow-unix-socket", path.clone())),
            (None, Some(host)) if !d.protected => Some(("--allow-host", host.clone())),
            _ => None,
        };
        let protection = if let Some(sealed) = super::Sealed::of_op(d.what.op) {
            Some(sealed.message())
        } else if d.protected && host.is_some() {
            Some("a host the proxy refuses whatever is allowed: only full-access reaches it directly")
        } else if d.protected {
            Some("a protected path: only full-access may change it")
        } else {
            None
        };
        let mut marker = Marker {
            v: 1,
            kind: "sandbox_denial",
            what: d.what.clone(),
            mode: self.mode,
            needed,
            source: if host.is_some() {
                "proxy"
            } else {
                "seccomp-notify"
            },
            message: d
                .reason
                .clone()
                .or_else(|| protection.map(str::to_owned))
                .or_else(|| self.temp_reason(d.what.path.as_deref())),
            retry: None,
            hint: None,
            allow: None,
        };
        match (needed, &self.escalation) {
            (None, _) => {
                marker.message = Some(format!("no mode this call may use allows this operation (it needs {}, above the managed maximum)", d.needed));
            }
            (Some(needed), Escalation::Impossible { preset }) => {
                let wider = crate::policy::preset::table()
                    .into_iter()
                    .find(|p| p.mode == needed)
                    .map_or_else(
                        || format!("--sandbox {needed}"),
                        |p| format!("--preset {}", p.key),
                    );
                marker.hint = Some(format!("no retry: the {preset} preset cannot escalate (approval never), so every request is rejected unasked; this needs {needed}, which only the user can choose as the standing profile (e.g. {wider})"));
            }
            (Some(needed), Escalation::Possible { .. }) => {
                let mut retry = self.retry(needed, protection);
                match &allow {
                    Some((flag, target)) if host.is_some() => retry.hint = format!("to reach only this host through the proxy, rerun with {flag} {target} (or add it to `allowed_hosts` in the user configuration); or ask for {needed} with --sandbox-permissions"),
                    Some((flag, path)) => retry.hint = format!("to reach only this socket, rerun with {flag} {path}; or ask for {needed} with --sandbox-permissions"),
                    None => {}
                }
                marker.retry = Some(retry);
            }
        }
        marker.allow = allow;
        marker
    }

    /// Records one denial: in the denial log now, on stderr when the call ends.
    pub fn record(&mut self, d: &Denial) {
        use std::io::Write;
        let marker = self.marker(d);
        if let (Some((log, _)), Ok(line)) = (&mut self.log, serde_json::to_string(&marker)) {
            // One write per line: concurrent readers never see half a marker.
            let _ = log.write_all(format!("{line}\n").as_bytes());
        }
        self.hold(d, marker);
    }

    /// Records a denial another process already wrote to the denial log (the proxy's):
    /// for stderr only.
    pub fn record_logged_elsewhere(&mut self, d: &Denial) {
        let marker = self.marker(d);
        self.hold(d, marker);
    }

    /// The denial log's fd, which a process forked to record denials keeps open.
    pub fn log_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.log.as_ref().map(|(file, _)| file.as_raw_fd())
    }

    fn hold(&mut self, d: &Denial, marker: Marker) {
        self.count += 1;
        if let Some(needed) = self.reachable(d.needed) {
            self.widest = Some(self.widest.map_or(needed, |w| w.max(needed)));
        }
        let target = d
            .what
            .path
            .clone()
            .or_else(|| d.what.addr.clone())
            .or_else(|| d.what.host.as_deref().map(|h| host_port(h, d.what.port)))
            .unwrap_or_default();
        if self.shown.len() < STDERR_CAP && self.shown.insert((d.what.op, target)) {
            self.held.push(marker);
        }
    }

    /// Returns the lines for stderr once the command ended: its markers and a summary when
    /// it failed; when it succeeded, one note at most, since a retry would change nothing
    /// the caller needs.
    pub fn closing_lines(&self, succeeded: bool) -> Vec<String> {
        let n = self.count;
        if n == 0 {
            return vec![];
        }
        let what = if n == 1 { "operation" } else { "operations" };
        if succeeded {
            let whereto = match &self.log {
                Some((_, path)) => format!("every marker is in {}", path.display()),
                None => "--denial-log FILE keeps their markers".to_owned(),
            };
            return vec![tagged(format!(
                "sandgate: note: {n} {what} refused under {}; the command succeeded, so none is shown ({whereto})",
                self.mode
            ))];
        }
        let mut lines: Vec<String> = self
            .held
            .iter()
            .filter_map(|marker| serde_json::to_value(marker).ok())
            .map(|body| line("sandgate: denied", body))
            .collect();
        lines.push(tagged(match (&self.escalation, self.widest) {
            (Escalation::Impossible { preset }, _) => format!(
                "sandgate: {n} {what} denied under {}; the {preset} preset cannot escalate",
                self.mode
            ),
            (Escalation::Possible { .. }, Some(needed)) => format!(
                "sandgate: {n} {what} denied under {}; rerun with --sandbox-permissions {needed} --justification \"…\"",
                self.mode
            ),
            (Escalation::Possible { .. }, None) => format!(
                "sandgate: {n} {what} denied under {}; no mode this call may use allows them",
                self.mode
            ),
        }));
        lines
    }
}

/// `host:port`, with an IPv6 address in brackets, as `--allow-host` takes it.
fn host_port(host: &str, port: Option<u16>) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    port.map_or(host.clone(), |p| format!("{host}:{p}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::denial::{Denial, Escalation, Form, Operation};

    fn denial(needed: Mode) -> Denial {
        Denial {
            what: Operation {
                op: "create",
                path: Some("/etc/x".into()),
                addr: None,
                host: None,
                port: None,
                syscall: "openat",
                pid: 1,
            },
            needed,
            protected: false,
            reason: None,
        }
    }

    fn reporter(escalation: Escalation, form: Form) -> Reporter {
        let argv = vec!["sandgate".into(), "--".into(), "true".into()];
        Reporter::new(Mode::ReadOnly, Some(argv), form, escalation, None)
    }

    #[test]
    fn a_mode_above_the_managed_maximum_is_no_retry() {
        let r = reporter(
            Escalation::Possible {
                ceiling: Some(Mode::WorkspaceWrite),
            },
            Form::Argv,
        );
        let m = r.marker(&denial(Mode::FullAccess));
        assert_eq!(m.needed, None);
        assert!(m.retry.is_none());
        let m = r.marker(&denial(Mode::WorkspaceWrite));
        assert_eq!(m.needed, Some(Mode::WorkspaceWrite));
        let argv = m.retry.and_then(|r| r.argv).unwrap_or_default();
        assert_eq!(argv[1..3], ["--sandbox-permissions", "workspace-write"]);
    }

    #[test]
    fn approval_never_offers_no_retry_but_names_the_wider_preset() {
        let r = reporter(
            Escalation::Impossible {
                preset: "locked".into(),
            },
            Form::Argv,
        );
        let m = r.marker(&denial(Mode::WorkspaceWrite));
        assert!(m.retry.is_none());
        let hint = m.hint.unwrap_or_default();
        assert!(hint.contains("locked preset cannot escalate"), "{hint}");
        assert!(hint.contains("--preset workspace-write"), "{hint}");
    }

    #[test]
    fn success_closes_with_one_note_and_failure_with_the_markers() {
        let mut r = reporter(Escalation::Possible { ceiling: None }, Form::Stdin);
        r.record(&denial(Mode::WorkspaceWrite));
        r.record(&denial(Mode::WorkspaceWrite));
        let note = r.closing_lines(true);
        assert_eq!(note.len(), 1);
        assert!(note[0].starts_with("sandgate: note: 2 operations refused"));
        let lines = r.closing_lines(false);
        // One marker per distinct (op, path), then the summary.
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains(r#""stdin":"the script must be fed again on stdin""#));
    }
}
