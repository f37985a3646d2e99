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

/// Adds the caller's tag to a line of text bound for stderr.
pub fn tagged(text: String) -> String {
    match tag() {
        Some(tag) => format!("{text} [tag {tag}]"),
        None => text,
    }
}

/// The longest line a marker or note may take, its newline included: sandgate writes it
/// to a pipe in one piece, so no other writer to the same stderr — a process the command
/// left running — can put its bytes inside a line that carries the caller's tag.
pub const LINE_MAX: usize = crate::output::PIPE_BUF;

/// What a shortened marker says about itself.
const ELIDED: &str = "shortened to fit in one line; the denial log (--denial-log) has it whole";

/// Renders `body`, with the caller's tag, as one line `PREFIX {JSON}` that fits in
/// [`LINE_MAX`]: when it does not, the retry's argv and directive go first (its hint
/// still says how to ask), then every long string is shortened, and at last only the
/// fields that name the refusal stay.
pub fn line(prefix: &str, body: Value) -> String {
    let Value::Object(mut fields) = body else {
        return format!("{prefix} {body}");
    };
    if let Some(tag) = tag() {
        fields.insert("tag".into(), json!(tag));
    }
    let render = |fields: &Map<String, Value>| {
        let line = format!("{prefix} {}", for_terminal(&Value::Object(fields.clone()))?);
        (line.len() < LINE_MAX).then_some(line)
    };
    if let Some(line) = render(&fields) {
        return line;
    }
    fields.insert("elided".into(), json!(ELIDED));
    if let Some(Value::Object(retry)) = fields.get_mut("retry") {
        retry.remove("argv");
        retry.remove("directive");
    }
    if let Some(line) = render(&fields) {
        return line;
    }
    for (key, value) in fields.iter_mut() {
        if key != "tag" {
            shorten(value, 256);
        }
    }
    if let Some(line) = render(&fields) {
        return line;
    }
    fields.retain(|key, _| {
        matches!(
            key.as_str(),
            "v" | "kind" | "op" | "mode" | "needed" | "tag" | "elided"
        )
    });
    render(&fields).unwrap_or_else(|| format!("{prefix} {{}}"))
}

/// `value` as JSON in which every character a terminal could act on is escaped. JSON
/// escapes C0 controls only; a path the command chose may also hold DEL, C1 controls
/// (U+009B is a CSI that terminals honour in UTF-8 too) or bidirectional overrides, which
/// would let it clear the screen or reorder what a person reads inside a real marker.
fn for_terminal(value: &Value) -> Option<String> {
    use serde::Serialize;
    struct Escaping;
    impl serde_json::ser::Formatter for Escaping {
        fn write_string_fragment<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            fragment: &str,
        ) -> std::io::Result<()> {
            for c in fragment.chars() {
                if acts_on_a_terminal(c) {
                    write!(writer, "\\u{:04x}", u32::from(c))?;
                } else {
                    let mut buf = [0u8; 4];
                    writer.write_all(c.encode_utf8(&mut buf).as_bytes())?;
                }
            }
            Ok(())
        }
    }
    let mut out = Vec::new();
    value
        .serialize(&mut serde_json::Serializer::with_formatter(
            &mut out, Escaping,
        ))
        .ok()?;
    String::from_utf8(out).ok()
}

/// DEL, C1 controls, and the invisible characters that change how text around them shows
/// (bidirectional marks, embeddings, overrides and isolates, zero-width and line/paragraph
/// separators, the BOM). All lie in the basic plane, so `\uXXXX` spells each.
fn acts_on_a_terminal(c: char) -> bool {
    matches!(
        c,
        '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
    )
}

/// Cuts every string in `value` to at most `chars` characters.
fn shorten(value: &mut Value, chars: usize) {
    match value {
        Value::String(text) if text.chars().count() > chars => {
            *text = text
                .chars()
                .take(chars)
                .chain(std::iter::once('…'))
                .collect();
        }
        Value::Array(items) => items.iter_mut().for_each(|v| shorten(v, chars)),
        Value::Object(fields) => fields.values_mut().for_each(|v| shorten(v, chars)),
        _ => {}
    }
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
    line("sandgate: denied", body)
}

/// At most this many markers go to stderr per call; the log gets them all.
pub const STDERR_CAP: usize = 20;

/// The `op` of every network refusal; one with a `path` is a unix socket refused for its
/// provenance, which `--allow-unix-socket` can allow alone.
pub const NETWORK: &str = "network";

/// The placeholder a caller replaces with its justification.
pub const WHY: &str = "<why>";

/// What was refused, as the supervisor saw it and as every marker names it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Operation {
    /// `write`, `create`, `remove`, `rename`, `link`, `chmod`, `chown`, `truncate`,
    /// `mknod`, `utimes`, `xattr`, `network`, `ptrace`, `io_uring`, `mount`, `namespace`, …
    pub op: &'static str,
    /// The path as the command named it (joined to its cwd or dirfd when relative).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The socket address, for network operations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// The host and port a request to sandgate's proxy named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The call refused; `proxy` for a request the proxy refused.
    pub syscall: &'static str,
    /// The calling process; 0 when not known (a request to the proxy, which sees only a
    /// TCP connection).
    pub pid: u32,
}

/// One operation the sandbox refused, and what would allow it.
#[derive(Debug, Clone)]
pub struct Denial {
    pub what: Operation,
    /// The narrowest mode that would allow it.
    pub needed: Mode,
    /// The path is protected (sandgate's own files, `.sandgate`, what the profile names):
    /// only `full-access` reaches it, and the marker says why.
    pub protected: bool,
    /// Why, when the refusing side said (the proxy's one-line reason).
    pub reason: Option<String>,
}

/// What the supervisor's seal rules refuse whatever the mode allows — only full access
/// may do it — each with its marker `op` and the marker's explanation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sealed {
    GitConfig,
    GitHook,
    ProjectConfig,
    GitMetadata,
}

impl Sealed {
    const ALL: [Sealed; 4] = [
        Sealed::GitConfig,
        Sealed::GitHook,
        Sealed::ProjectConfig,
        Sealed::GitMetadata,
    ];

    /// The marker `op`.
    pub fn op(self) -> &'static str {
        match self {
            Sealed::GitConfig => "git_config",
            Sealed::GitHook => "git_hook",
            Sealed::ProjectConfig => "project_config",
            Sealed::GitMetadata => "git_metadata",
        }
    }

    /// Why only full access may do it: the marker's `message`, and the reason its retry
    /// hint gives.
    pub fn message(self) -> &'static str {
        match self {
            Sealed::GitConfig => "git configuration: a file named config or config.worktree is written only by renaming a checked file into place (git's own way), and may not add or change an entry that names a program; only full-access may write it otherwise",
            Sealed::GitHook => "git hooks: nothing in a directory named hooks may become executable, and no link or symlink may be made there; only full-access may do it",
            Sealed::ProjectConfig => "sandgate's project configuration: nothing named .sandgate, and nothing in a directory of that name, may be created or changed; only full-access may do it",
            Sealed::GitMetadata => "protected git metadata: git on the host reads or runs it, so only full-access may change it",
        }
    }

    /// The seal rule whose marker `op` is `op`.
    pub fn of_op(op: &str) -> Option<Sealed> {
        Sealed::ALL.into_iter().find(|s| s.op() == op)
    }
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

mod reporter;
pub use reporter::{Marker, Reporter, Retry};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_marker_is_shortened_to_one_atomic_line() {
        let long = "x".repeat(3 * LINE_MAX);
        let body = json!({"v": 1, "kind": "sandbox_denial", "op": "create", "path": long,
            "retry": {"argv": ["sandgate", long], "directive": long, "hint": "rerun with …"}});
        let line = line("sandgate: denied", body);
        assert!(line.len() < LINE_MAX, "{}", line.len());
        let body: Value =
            serde_json::from_str(line.trim_start_matches("sandgate: denied ")).unwrap_or_default();
        assert_eq!(body["op"], "create");
        assert_eq!(body["retry"]["hint"], "rerun with …");
        assert!(body["retry"].get("argv").is_none(), "{body}");
        assert!(body["elided"].is_string(), "{body}");
    }

    #[test]
    fn what_a_terminal_would_act_on_is_escaped() {
        let path = "/etc/a\u{9b}2J\u{202e}gpj.exe\u{1b}[2J\u{7f}é";
        let line = marker("usage", None, path, Map::new());
        for c in ['\u{9b}', '\u{202e}', '\u{1b}', '\u{7f}'] {
            assert!(!line.contains(c), "{line:?}");
        }
        assert!(line.contains('é'), "{line}");
        let body: Value =
            serde_json::from_str(line.trim_start_matches("sandgate: denied ")).unwrap_or_default();
        assert_eq!(body["message"], path);
    }

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
