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
