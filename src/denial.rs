//! The marker envelope: one line `sandgate: denied {JSON}` on stderr. This
//! module renders sandgate's own refusals and notes; kernel-observed denials build on the
//! same envelope.

use serde_json::{json, Map, Value};

use crate::policy::Mode;

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
    format!("sandgate: denied {body}")
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
    /// The narrowest mode that would allow it; `None`: no profile of this call does.
    pub needed: Option<Mode>,
}

/// Collects denials: each one as NDJSON in the denial log, the first of each distinct
/// (op, target) on stderr up to [`STDERR_CAP`], and a summary at the end.
pub struct Reporter {
    /// The `-c` command string of a shell-mode call: its markers also carry the retry as
    /// a directive, since an agent that talks to its shell can only change that string.
    pub shell_command: Option<String>,
    mode: Mode,
    /// sandgate's own argv, for the retry hint.
    argv: Vec<String>,
    log: Option<std::fs::File>,
    shown: std::collections::HashSet<(&'static str, String)>,
    count: usize,
    widest: Option<Mode>,
    any_unallowable: bool,
}

/// At most this many markers go to stderr per call; the log gets them all.
pub const STDERR_CAP: usize = 20;

/// The `op` of every network refusal; one with a `path` is a unix socket refused for its
/// provenance, which `--allow-unix-socket` can allow alone.
pub const NETWORK: &str = "network";

/// The placeholder a caller replaces with its justification.
pub const WHY: &str = "<why>";

impl Reporter {
    /// A reporter for a call running at `mode`, invoked as `argv`, logging to `log`.
    pub fn new(mode: Mode, argv: Vec<String>, log: Option<std::fs::File>) -> Reporter {
        Reporter {
            shell_command: None,
            mode,
            argv,
            log,
            shown: std::collections::HashSet::new(),
            count: 0,
            widest: None,
            any_unallowable: false,
        }
    }

    /// Returns the exact invocation that asks for `needed`.
    fn retry(&self, needed: Mode) -> Vec<String> {
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

    /// Renders the marker JSON for `d`.
    pub fn marker(&self, d: &Denial) -> Value {
        let retry = match d.needed {
            Some(needed) => {
                let mut retry = json!({
                    "argv": self.retry(needed),
                    "hint": format!("rerun with --sandbox-permissions {needed} --justification \"{WHY}\" (replace {WHY} with the reason)"),
                });
                if let (Some(command), Value::Object(fields)) = (&self.shell_command, &mut retry) {
                    let line = crate::shell::directive_line(needed.as_str(), WHY);
                    fields.insert("directive".into(), json!(format!("{line}\n{command}")));
                }
                retry
            }
            None => Value::Null,
        };
        let mut body = json!({
            "v": 1,
            "kind": "sandbox_denial",
            "op": d.op,
            "syscall": d.syscall,
            "pid": d.pid,
            "mode": self.mode,
            "needed": d.needed,
            "source": "seccomp-notify",
            "retry": retry,
        });
        if let Value::Object(fields) = &mut body {
            if let Some(path) = &d.path {
                fields.insert("path".into(), json!(path));
                if d.op == NETWORK {
                    // Reaching one socket rarely needs a whole wider mode.
                    fields.insert("allow".into(), json!(["--allow-unix-socket", path]));
                    if let Some(Value::Object(retry)) = fields.get_mut("retry") {
                        retry.insert(
                            "hint".into(),
                            json!(format!("to reach only this socket, rerun with --allow-unix-socket {path}; or ask for {} with --sandbox-permissions", Mode::FullAccess)),
                        );
                    }
                }
            }
            if let Some(addr) = &d.addr {
                fields.insert("addr".into(), json!(addr));
            }
            if d.needed.is_none() {
                fields.insert(
                    "message".into(),
                    json!("no profile of this call allows this operation"),
                );
            }
            if d.op == crate::supervisor::GIT_METADATA_OP {
                let why = "protected git metadata: git on the host reads or runs it, so only full-access may change it";
                fields.insert("message".into(), json!(why));
                if let Some(Value::Object(retry)) = fields.get_mut("retry") {
                    retry.insert(
                        "hint".into(),
                        json!(format!("this is {why}; if the change is really needed, rerun with --sandbox-permissions {} --justification \"{WHY}\"", Mode::FullAccess)),
                    );
                }
            }
        }
        body
    }

    /// Records one denial.
    pub fn record(&mut self, d: &Denial) {
        use std::io::Write;
        let body = self.marker(d);
        if let Some(log) = &mut self.log {
            // One write per line: concurrent readers never see half a marker.
            let _ = log.write_all(format!("{body}\n").as_bytes());
        }
        self.count += 1;
        match d.needed {
            Some(n) => self.widest = Some(self.widest.map_or(n, |w| w.max(n))),
            None => self.any_unallowable = true,
        }
        let target = d
            .path
            .clone()
            .or_else(|| d.addr.clone())
            .unwrap_or_default();
        if self.shown.len() < STDERR_CAP && self.shown.insert((d.op, target)) {
            crate::say!("sandgate: denied {body}");
        }
    }

    /// Returns the summary line, if anything was denied.
    pub fn summary(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let n = self.count;
        let what = if n == 1 { "operation" } else { "operations" };
        Some(match self.widest {
            Some(needed) => format!(
                "sandgate: {n} {what} denied under {}; rerun with --sandbox-permissions {needed} --justification \"…\"",
                self.mode
            ),
            None => format!("sandgate: {n} {what} denied under {}; no profile of this call allows them", self.mode),
        })
    }

    /// Returns how many denials were recorded.
    pub fn count(&self) -> usize {
        self.count
    }
}
