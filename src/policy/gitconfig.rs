//! git's configuration format: one parser ([`parse`], a port of git's own) for two uses.
//!
//! - [`read`] finds what a configuration makes git read or run elsewhere —
//!   `core.hooksPath`, the targets of `include.path` / `includeIf.*.path`, and (in
//!   `.gitmodules`) submodule paths — so that they can be protected. It reads leniently:
//!   the files are the host user's own, a line git would refuse is passed over, and the
//!   worst a miss costs is one protection fewer on a path the user pointed git at.
//! - [`check_replacement`] decides whether a new configuration may replace an old one,
//!   and reads strictly: a text that cannot be read with certainty is refused, and so is
//!   any entry that names a program ([`programs::RULES`]) unless the old text had it.

pub mod parse;
pub mod programs;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use programs::names_program;

/// The largest configuration [`check_replacement`] reads. git's own are a few KiB.
pub const MAX_LEN: usize = 1 << 20;

/// What one configuration file points at.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pointers {
    /// `core.hooksPath`, as written.
    pub hooks_path: Option<String>,
    /// Every `include.path` and `includeIf.<cond>.path`, as written.
    pub includes: Vec<String>,
    /// Every `submodule.<name>.path` (in `.gitmodules`), as written.
    pub submodule_paths: Vec<String>,
    /// The words of the other entries that name a program ([`programs::RULES`]) that look
    /// like paths (they hold a `/`): the scripts and programs git would run, as written.
    pub program_paths: Vec<String>,
}

/// Reads `path`; a missing or unreadable file points at nothing.
pub fn read(path: &Path) -> Pointers {
    std::fs::read(path)
        .map(|text| pointers(&text))
        .unwrap_or_default()
}

/// What configuration text points at (see [`read`]).
pub fn pointers(text: &[u8]) -> Pointers {
    let mut out = Pointers::default();
    for entry in parse::parse_lenient(text) {
        let Some(value) = entry.value.as_deref() else {
            continue;
        };
        let value = String::from_utf8_lossy(value).into_owned();
        let sub = entry.subsection.is_some();
        match (entry.section.as_str(), sub, entry.key.as_str()) {
            ("core", false, "hookspath") => out.hooks_path = Some(value),
            ("include", false, "path") | ("includeif", true, "path") => out.includes.push(value),
            ("submodule", true, "path") => out.submodule_paths.push(value),
            _ if names_program(&entry).is_some() => out.program_paths.extend(path_words(&value)),
            _ => {}
        }
    }
    out
}

/// The words of a command (or a path) that look like paths: split on whitespace, quotes
/// and a shell alias's leading `!` removed, an option's `--name=` prefix dropped; only
/// those holding a `/` (a bare name is looked up on `PATH`).
fn path_words(value: &str) -> Vec<String> {
    value
        .trim_start()
        .trim_start_matches('!')
        .split_whitespace()
        .map(|word| word.trim_matches(|c| c == '"' || c == '\''))
        .map(|word| word.rsplit_once('=').map_or(word, |(_, v)| v))
        .filter(|word| word.contains('/'))
        .map(str::to_owned)
        .collect()
}

/// Why a new git configuration was refused: the entry that names a program (as
/// `section.subsection.key`, canonical case), or why the text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "`{key}` names a program git would run, and a sandboxed command may not add or \
         change such an entry; set it outside the sandbox if you trust it"
    )]
    Names { key: String },
    #[error(
        "the new git configuration cannot be read with certainty ({reason}); write it in \
         git's plain syntax"
    )]
    Unreadable { reason: String },
    #[error("the new git configuration is larger than {} KiB", MAX_LEN / 1024)]
    TooLarge,
}

impl Refusal {
    /// The entry that names a program, when that is the reason.
    pub fn key(&self) -> Option<&str> {
        match self {
            Refusal::Names { key } => Some(key),
            Refusal::Unreadable { .. } | Refusal::TooLarge => None,
        }
    }
}

/// Which configuration file a replacement is for, with what its rules need of the other.
#[derive(Clone, Copy, Debug)]
pub enum File<'a> {
    /// A repository's `config`, with the text of the `config.worktree` beside it, if any.
    Config { worktree: Option<&'a [u8]> },
    /// A `config.worktree`: git writes no `core.worktree` there itself.
    Worktree,
}

/// [`check_replacement_in`] for a `config` with no `config.worktree` beside it.
pub fn check_replacement(old: Option<&[u8]>, new: &[u8]) -> Result<(), Refusal> {
    check_replacement_in(File::Config { worktree: None }, old, new)
}

/// Returns whether `new` may replace `old` (None: a new file) as `file`: `new` may not add
/// or change any entry that names a program to run, relative to `old`.
///
/// Every entry of `new` that names a program must appear in `old` with the same canonical
/// name and value, as often (multisets: order does not matter). An `old` that cannot be
/// read counts as empty: only the user's own, readable settings are kept. Nor may
/// `core.worktree` change where a relative `core.hooksPath` would follow it (in `new`, or
/// in the `config.worktree` beside it), nor in a `config.worktree` at all.
pub fn check_replacement_in(file: File<'_>, old: Option<&[u8]>, new: &[u8]) -> Result<(), Refusal> {
    if new.len() > MAX_LEN {
        return Err(Refusal::TooLarge);
    }
    let new = parse::parse(new).map_err(|e| Refusal::Unreadable {
        reason: e.to_string(),
    })?;
    let old = old
        .filter(|old| old.len() <= MAX_LEN)
        .and_then(|old| parse::parse(old).ok())
        .unwrap_or_default();
    // Entries by canonical name and value: (section, subsection, key, value).
    let mut kept: HashMap<_, usize> = HashMap::new();
    for e in &old {
        let id = (&e.section, &e.subsection, &e.key, &e.value);
        *kept.entry(id).or_default() += 1;
    }
    for e in new.iter().filter(|e| names_program(e).is_some()) {
        match kept.get_mut(&(&e.section, &e.subsection, &e.key, &e.value)) {
            Some(left) if *left > 0 => *left -= 1,
            _ => {
                return Err(Refusal::Names {
                    key: e.display_name(),
                })
            }
        }
    }
    // A relative `core.hooksPath` is found from the top of the working tree: moving the
    // working tree moves the hooks to a directory the sandbox may have made.
    let worktree = |entries: &[parse::Entry]| -> Vec<Option<Vec<u8>>> {
        entries
            .iter()
            .filter(|e| is_core(e, "worktree"))
            .map(|e| e.value.clone())
            .collect()
    };
    let relative_hooks = |entries: &[parse::Entry]| {
        entries.iter().any(|e| {
            is_core(e, "hookspath")
                && e.value
                    .as_deref()
                    .is_some_and(|v| !v.starts_with(b"/") && !v.starts_with(b"~"))
        })
    };
    let follows = match file {
        File::Worktree => true,
        File::Config { worktree: beside } => {
            relative_hooks(&new) || beside.is_some_and(|t| relative_hooks(&parse::parse_lenient(t)))
        }
    };
    if follows && worktree(&new) != worktree(&old) {
        return Err(Refusal::Names {
            key: "core.worktree".into(),
        });
    }
    Ok(())
}

fn is_core(e: &parse::Entry, key: &str) -> bool {
    e.section == "core" && e.subsection.is_none() && e.key == key
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
mod tests;

#[cfg(test)]
mod pointer_tests {
    use super::*;

    #[test]
    fn hooks_path_and_includes_are_found() {
        let p = pointers(
            b"[core]\n\trepositoryformatversion = 0\n\thooksPath = \".githooks\" # ours\n\
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
    fn the_paths_programs_are_named_by_are_found() {
        let p = pointers(
            b"[core]\n\tfsmonitor = tools/fsmon.sh\n\tpager = less -R\n\
             [alias]\n\tx = \"!./scripts/x --out=build/y\"\n\tst = status\n\
             [diff \"conv\"]\n\ttextconv = python3 'tools/conv.py'\n\
             [remote \"o\"]\n\turl = ../o.git\n",
        );
        assert_eq!(
            p.program_paths,
            ["tools/fsmon.sh", "./scripts/x", "build/y", "tools/conv.py"]
        );
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
    }
}
