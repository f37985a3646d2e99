//! Just enough of git's configuration format to find what makes git read or run files
//! elsewhere: `core.hooksPath` and the targets of `include.path` / `includeIf.*.path`.
//!
//! A value the reader cannot follow (an unterminated quote, say) is skipped: the files it
//! reads are the host user's own, and the worst a miss costs is one protection fewer on a
//! path the user pointed git at themselves — never a wider sandbox.

use std::path::{Path, PathBuf};

/// What one configuration file points at.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pointers {
    /// `core.hooksPath`, as written.
    pub hooks_path: Option<String>,
    /// Every `include.path` and `includeIf.<cond>.path`, as written.
    pub includes: Vec<String>,
    /// Every `submodule.<name>.path` (in `.gitmodules`), as written.
    pub submodule_paths: Vec<String>,
}

/// Reads `path`; a missing or unreadable file points at nothing.
pub fn read(path: &Path) -> Pointers {
    std::fs::read_to_string(path)
        .map(|text| parse(&text))
        .unwrap_or_default()
}

/// Parses configuration text.
pub fn parse(text: &str) -> Pointers {
    let mut out = Pointers::default();
    let mut section = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut rest = line;
        if let Some(after) = line.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                continue;
            };
            // `[includeIf "gitdir:~/work/"]`: the section name is the part before the
            // quoted subsection; section names are case-insensitive.
            section = after[..end]
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            rest = after[end + 1..].trim();
            if rest.is_empty() {
                continue;
            }
        }
        let Some((key, value)) = rest.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let Some(value) = unquote(value.trim()) else {
            continue;
        };
        match (section.as_str(), key.as_str()) {
            ("core", "hookspath") => out.hooks_path = Some(value),
            ("include" | "includeif", "path") => out.includes.push(value),
            ("submodule", "path") => out.submodule_paths.push(value),
            _ => {}
        }
    }
    out
}

/// Strips a value's quotes and trailing comment; `None` when it cannot be read.
fn unquote(value: &str) -> Option<String> {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    (!quoted).then(|| out.trim_end().to_owned())
}

/// Resolves a path value as git does: `~/` from `home`, relative ones from `base`.
pub fn resolve_value(value: &str, base: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(rest) = value.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    if value.starts_with('~') {
        // `~user/…`: another user's home is not in any writable root of ours.
        return None;
    }
    Some(base.join(value))
}

/// Why a replacement configuration file is refused: the entry that names a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The entry, as `section[.subsection].name` with section and name in lower case.
    pub key: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} names a program git would run", self.key)
    }
}

/// Checks a configuration file that is to replace `old` (`None`: there is none): `new` may
/// not add or change an entry that names a program git runs (or a file it reads more
/// configuration from); every other change is fine, and such entries already in `old`
/// may stay as they are.
///
/// # Errors
/// The first entry of `new` that names a program and is not in `old` as it is.
pub fn check_replacement(old: Option<&[u8]>, new: &[u8]) -> Result<(), Refusal> {
    let kept = old.map(entries).unwrap_or_default();
    for entry in entries(new) {
        if names_a_program(&entry) && !kept.contains(&entry) {
            return Err(Refusal { key: entry.0 });
        }
    }
    Ok(())
}

/// Every `(key, value)` of a configuration file, keys as [`Refusal::key`]; a line that
/// cannot be read counts as an entry of its own raw text, so that it is never mistaken
/// for an allowed one.
fn entries(bytes: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut section = String::new();
    for raw in text.lines() {
        let mut rest = raw.trim();
        if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                out.push((format!("unreadable line {raw:?}"), String::new()));
                continue;
            };
            let header = &after[..end];
            section = match header.split_once(char::is_whitespace) {
                Some((name, sub)) => {
                    format!(
                        "{}.{}",
                        name.to_ascii_lowercase(),
                        sub.trim().trim_matches('"')
                    )
                }
                None => header.to_ascii_lowercase(),
            };
            rest = after[end + 1..].trim();
        }
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
            continue;
        }
        let (name, value) = rest.split_once('=').unwrap_or((rest, "true"));
        let value = unquote(value.trim()).unwrap_or_else(|| value.to_owned());
        out.push((
            format!("{section}.{}", name.trim().to_ascii_lowercase()),
            value,
        ));
    }
    out
}

/// Returns true for an entry whose value git runs as a program or reads as more
/// configuration.
fn names_a_program((key, value): &(String, String)) -> bool {
    const KEYS: [&str; 12] = [
        "core.fsmonitor",
        "core.hookspath",
        "core.sshcommand",
        "core.pager",
        "core.editor",
        "core.askpass",
        "core.gitproxy",
        "sequence.editor",
        "credential.helper",
        "gpg.program",
        "include.path",
        "diff.external",
    ];
    const LAST: [&str; 10] = [
        "clean", "smudge", "process", "textconv", "command", "driver", "helper", "cmd", "program",
        "path",
    ];
    let (section, name) = key.rsplit_once('.').unwrap_or(("", key));
    let top = section.split('.').next().unwrap_or_default();
    KEYS.contains(&key.as_str())
        || key.starts_with("unreadable line")
        || top == "pager"
        || top == "includeif"
        || (top == "alias" && value.trim_start().starts_with('!'))
        || (top == "submodule" && name == "update" && value.trim_start().starts_with('!'))
        || (section.contains('.') && LAST.contains(&name) && top != "submodule")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_path_and_includes_are_found() {
        let p = parse(
            "[core]\n\trepositoryformatversion = 0\n\thooksPath = \".githooks\" # ours\n\
             [include]\n\tpath = ../shared.gitconfig\n\
             [includeIf \"gitdir:~/work/\"]\n\tpath = ~/work.gitconfig\n\
             [Core] HooksPath = later\n[other]\n\tpath = ignored\n\
             [submodule \"lib\"]\n\tpath = vendor/lib\n",
        );
        assert_eq!(p.submodule_paths, ["vendor/lib"]);
        assert_eq!(p.hooks_path.as_deref(), Some("later"));
        assert_eq!(p.includes, ["../shared.gitconfig", "~/work.gitconfig"]);
    }

    #[test]
    fn a_replacement_may_not_add_or_change_a_program() {
        let old = b"[core]\n\tbare = false\n\tfsmonitor = mine\n[alias]\n\tst = status\n";
        let ok = |new: &str| check_replacement(Some(old), new.as_bytes());
        let key = |new: &str| ok(new).map_err(|r| r.key);
        assert_eq!(
            ok("[core]\n\tbare = false\n\tfsmonitor = mine\n[remote \"o\"]\n\turl = x\n"),
            Ok(())
        );
        assert_eq!(ok("[user]\n\temail = a@b\n"), Ok(()));
        assert_eq!(
            key("[core]\n\tfsmonitor = evil\n"),
            Err("core.fsmonitor".into())
        );
        assert_eq!(key("[alias]\n\tx = !sh\n"), Err("alias.x".into()));
        assert_eq!(
            key("[filter \"lfs\"]\n\tclean = x\n"),
            Err("filter.lfs.clean".into())
        );
        assert_eq!(
            key("[includeIf \"gitdir:/\"]\n\tpath = x\n"),
            Err("includeif.gitdir:/.path".into())
        );
        assert_eq!(
            key("[core]\n\tHooksPath = h\n"),
            Err("core.hookspath".into())
        );
        assert_eq!(check_replacement(None, b"[core]\n\tbare = true\n"), Ok(()));
        assert!(check_replacement(None, b"[core]\n\tfsmonitor = mine\n").is_err());
    }

    #[test]
    fn values_resolve_like_git() {
        let home = Path::new("/home/u");
        assert_eq!(
            resolve_value("~/x", Path::new("/r"), Some(home)),
            Some(PathBuf::from("/home/u/x"))
        );
        assert_eq!(
            resolve_value("x/y", Path::new("/r"), Some(home)),
            Some(PathBuf::from("/r/x/y"))
        );
        assert_eq!(resolve_value("~other/x", Path::new("/r"), Some(home)), None);
        assert_eq!(unquote("\"a\\\"b\" ; c"), Some("a\"b".into()));
        assert_eq!(unquote("\"open"), None);
    }
}
