//! Denial markers: one line `sandgate: denied {JSON}` per refusal, for sandgate's own
//! refusals and for the operations the supervisor saw the sandbox refuse.
//!
//! Markers exist so that a caller — often an agent — retries the right way, so they never
//! push it to escalate for nothing: refused operations of a command that succeeded stay in
//! the denial log (one short note on stderr says so), a standing policy that cannot
//! escalate gets no retry that is certain to be rejected, and `needed` is the narrowest
//! mode that would allow the operation. A command can print look-alike lines of its own;
//! the denial log, which it cannot write, is the authoritative channel, and a caller that
//! sets [`TAG_ENV`] finds its value in every marker sandgate prints.

use serde_json::{json, Map, Value};

use crate::policy::Mode;

/// The variable whose value every marker on stderr carries as `"tag"`; the command never
/// sees it.
pub const TAG_ENV: &str = "SANDGATE_MARKER_TAG";

/// The caller's marker tag, read once.
fn tag() -> Option<&'static str> {
    static TAG: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    TAG.get_or_init(|| std::env::var(TAG_ENV).ok()).as_deref()
}

/// Adds the caller's tag to a marker or note bound for stderr.
pub fn stamp(mut body: Value) -> Value {
    if let (Some(tag), Value::Object(fields)) = (tag(), &mut body) {
        fields.insert("tag".into(), json!(tag));
    }
    body
}

/// Renders one marker line for a refusal or note of `kind`, with extra fields.
pub fn marker(kind: &str, mode: Option<Mode>, message: &str, extra: Map<String, Value>) -> String {
    let mut body = json!({
        "v": 1,
        "kind": kind,
        "mode": mode.map(Mode::as_str),
        "message": message,
    });
    if let Value::Object(fields) = &mut body {
        fields.extend(extra);
    }
    format!("sandgate: denied {}", stamp(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_is_one_line_of_json_after_the_prefix() -> Result<(), serde_json::Error> {
        let line = marker("usage", Some(Mode::ReadOnly), "bad\nthing", Map::new());
        assert!(!line.contains('\n'));
        let body: Value = serde_json::from_str(line.trim_start_matches("sandgate: denied "))?;
        assert_eq!(body["kind"], "usage");
        assert_eq!(body["mode"], "read-only");
        assert_eq!(body["v"], 1);
        Ok(())
    }
}

/// One operation the sandbox refused, as the supervisor saw it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Denial {
    /// `write`, `create`, `remove`, `rename`, `link`, `chmod`, `chown`, `truncate`,
    /// `mknod`, `utimes`, `xattr`, `network`, `ptrace`, `io_uring`, `mount`, `namespace`, …
    pub op: &'static str,
    /// The path as the command named it (joined to its cwd or dirfd when relative).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The socket address, for network operations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    pub syscall: &'static str,
    pub pid: u32,
    /// The narrowest mode that would allow it.
    pub needed: Mode,
    /// The path is protected (sandgate's own files, `.sandgate`, what the profile names):
    /// only `full-access` reaches it, and the marker says why.
    #[serde(skip)]
    pub protected: bool,
}

/// How the command reached sandgate, which decides how a retry is spelled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Form {
    /// `sandgate [FLAGS] -- CMD ARGS`, or shell mode's `--version` and the like.
    #[default]
    Argv,
    /// Shell mode's `-c STRING`: an agent that only talks to its shell can change that
    /// string alone, so the retry also says which string to send.
    ShellCommand(String),
    /// Shell mode running a script file: the directive goes at the script's top.
    Script,
    /// Shell mode reading the script from stdin (`-s`, a pipe): replaying the argv is not
    /// enough, the script must be fed again.
    Stdin,
}

/// Whether the standing policy lets a refused operation be retried wider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Escalation {
    /// A request goes to an answerer, up to `ceiling` (the managed maximum, if any).
    Possible { ceiling: Option<Mode> },
    /// Approval `never`: every request is rejected before anyone is asked, so a marker
    /// offers no retry.
    Impossible { preset: String },
}

/// Collects denials: each one as NDJSON in the denial log at once, the first of each
/// distinct (op, target) for stderr up to [`STDERR_CAP`], shown when the call ends — and
/// only if the command failed.
pub struct Reporter {
    mode: Mode,
    /// sandgate's own argv, for the retry.
    argv: Vec<String>,
    form: Form,
    escalation: Escalation,
    log: Option<(std::fs::File, std::path::PathBuf)>,
    shown: std::collections::HashSet<(&'static str, String)>,
    held: Vec<Value>,
    count: usize,
    /// The widest mode a retry may ask for, over every denial recorded.
    widest: Option<Mode>,
}

/// At most this many markers go to stderr per call; the log gets them all.
pub const STDERR_CAP: usize = 20;

/// The `op` of every network refusal; one with a `path` is a unix socket refused for its
/// provenance, which `--allow-unix-socket` can allow alone.
pub const NETWORK: &str = "network";

/// The placeholder a caller replaces with its justification.
pub const WHY: &str = "<why>";

impl Reporter {
    /// A reporter for a call running at `mode`, invoked as `argv` in `form`, logging to
    /// `log` (the open file and its path, for the closing note).
    pub fn new(
        mode: Mode,
        argv: Vec<String>,
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
        }
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
    fn retry_argv(&self, needed: Mode) -> Vec<String> {
        let mut argv = self.argv.clone();
        let at = usize::from(!argv.is_empty());
        let flags = [
            "--sandbox-permissions".to_owned(),
            needed.as_str().to_owned(),
            "--justification".to_owned(),
            WHY.to_owned(),
        ];
        argv.splice(at..at, flags);
        argv
    }

    /// The `retry` object for an operation that `needed` allows; `protection` says why
    /// only `full-access` reaches its path, when that is the reason.
    fn retry(&self, needed: Mode, protection: Option<&str>) -> Value {
        let why = protection.map_or_else(String::new, |what| {
            format!("this is {what}; if the change is really needed, ")
        });
        let line = crate::shell::directive_line(needed.as_str(), WHY);
        let (hint, directive, stdin) = match &self.form {
            Form::Argv => (
                format!("{why}rerun with --sandbox-permissions {needed} --justification \"{WHY}\" (replace {WHY} with the reason)"),
                None,
                None,
            ),
            Form::ShellCommand(command) => (
                format!("{why}rerun with --sandbox-permissions {needed} --justification \"{WHY}\", or send the command with the directive line first (replace {WHY} with the reason)"),
                Some(format!("{line}\n{command}")),
                None,
            ),
            Form::Script => (
                format!("{why}rerun with --sandbox-permissions {needed} --justification \"{WHY}\", or put the directive line at the top of the script, after any #! line (replace {WHY} with the reason)"),
                Some(line),
                None,
            ),
            Form::Stdin => (
                format!("{why}rerun with --sandbox-permissions {needed} --justification \"{WHY}\" and feed the same script on stdin again, or put the directive line at its top (replace {WHY} with the reason)"),
                Some(line),
                Some("the script must be fed again on stdin"),
            ),
        };
        let mut retry = json!({"argv": self.retry_argv(needed), "hint": hint});
        if let Value::Object(fields) = &mut retry {
            if let Some(directive) = directive {
                fields.insert("directive".into(), json!(directive));
            }
            if let Some(stdin) = stdin {
                fields.insert("stdin".into(), json!(stdin));
            }
        }
        retry
    }

    /// Renders the marker JSON for `d` (without the caller's tag).
    pub fn marker(&self, d: &Denial) -> Value {
        let needed = self.reachable(d.needed);
        let mut body = json!({
            "v": 1,
            "kind": "sandbox_denial",
            "op": d.op,
            "syscall": d.syscall,
            "pid": d.pid,
            "mode": self.mode,
            "needed": needed,
            "source": "seccomp-notify",
            "retry": Value::Null,
        });
        let Value::Object(fields) = &mut body else {
            return body;
        };
        if let Some(path) = &d.path {
            fields.insert("path".into(), json!(path));
        }
        if let Some(addr) = &d.addr {
            fields.insert("addr".into(), json!(addr));
        }
        let socket = d.op == NETWORK && d.path.is_some();
        if let (Some(path), true) = (&d.path, socket) {
            // Reaching one socket rarely needs a whole wider mode.
            fields.insert("allow".into(), json!(["--allow-unix-socket", path]));
        }
        let protection = if d.op == crate::supervisor::GIT_METADATA_OP {
            Some("protected git metadata: git on the host reads or runs it, so only full-access may change it")
        } else if d.protected {
            Some("a protected path: only full-access may change it")
        } else {
            None
        };
        if let Some(what) = protection {
            fields.insert("message".into(), json!(what));
        }
        match (needed, &self.escalation) {
            (None, _) => {
                fields.insert(
                    "message".into(),
                    json!(format!("no mode this call may use allows this operation (it needs {}, above the managed maximum)", d.needed)),
                );
            }
            (Some(needed), Escalation::Impossible { preset }) => {
                let wider = crate::policy::preset::table()
                    .into_iter()
                    .find(|p| p.mode == needed)
                    .map_or_else(
                        || format!("--sandbox {needed}"),
                        |p| format!("--preset {}", p.key),
                    );
                fields.insert(
                    "hint".into(),
                    json!(format!("no retry: the {preset} preset cannot escalate (approval never), so every request is rejected unasked; this needs {needed}, which only the user can choose as the standing profile (e.g. {wider})")),
                );
            }
            (Some(needed), Escalation::Possible { .. }) => {
                let mut retry = self.retry(needed, protection);
                if let (Some(path), true, Value::Object(r)) = (&d.path, socket, &mut retry) {
                    r.insert(
                        "hint".into(),
                        json!(format!("to reach only this socket, rerun with --allow-unix-socket {path}; or ask for {needed} with --sandbox-permissions")),
                    );
                }
                fields.insert("retry".into(), retry);
            }
        }
        body
    }

    /// Records one denial: in the denial log now, on stderr when the call ends.
    pub fn record(&mut self, d: &Denial) {
        use std::io::Write;
        let body = self.marker(d);
        if let Some((log, _)) = &mut self.log {
            // One write per line: concurrent readers never see half a marker.
            let _ = log.write_all(format!("{body}\n").as_bytes());
        }
        self.count += 1;
        if let Some(needed) = self.reachable(d.needed) {
            self.widest = Some(self.widest.map_or(needed, |w| w.max(needed)));
        }
        let target = d
            .path
            .clone()
            .or_else(|| d.addr.clone())
            .unwrap_or_default();
        if self.shown.len() < STDERR_CAP && self.shown.insert((d.op, target)) {
            self.held.push(body);
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
            return vec![format!(
                "sandgate: note: {n} {what} refused under {}; the command succeeded, so none is shown ({whereto})",
                self.mode
            )];
        }
        let mut lines: Vec<String> = self
            .held
            .iter()
            .map(|body| format!("sandgate: denied {}", stamp(body.clone())))
            .collect();
        lines.push(match (&self.escalation, self.widest) {
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
        });
        lines
    }
}
