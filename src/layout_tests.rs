//! The shape of the source tree, checked on the files themselves: no source file (of the
//! library, the tests, examples and benchmarks) over 1000 lines, and, in the library
//! (`main.rs` only calls into it), arrows one way — no import circle between top-level
//! modules, nor between files of which neither is the other's ancestor (a module's own
//! files may use what it declares, and it theirs).
//!
//! References are read from the text: `use` trees (braces expanded) and paths in code
//! (`crate::a::b`, `super::x`, `self::y`, a child module by name), with comments and string
//! literals removed first. A path is attributed to the deepest module file it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a source file may be.
const MAX_LINES: usize = 1000;

/// A module path from the crate root (`["supervisor", "perform"]`).
type ModPath = Vec<String>;

fn source_files() -> BTreeMap<ModPath, (PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && path != root.join("main.rs") {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.insert(module_of(&root, &path), (path, text));
            }
        }
    }
    files
}

fn module_of(root: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(root).unwrap_or(file).with_extension("");
    let mut parts: ModPath = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// `text` without comments and with every string literal emptied.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    match (escaped, c) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => escaped = false,
                    }
                }
                out.push_str("\"\"");
            }
            // A char literal that is a quote would start a string above.
            '\'' if chars.peek() == Some(&'"') => {
                chars.next();
                out.push_str("'\"");
            }
            c => out.push(c),
        }
    }
    out
}

/// The paths a `use` tree names, braces expanded: `a::{b, c::{d}}` → `a::b`, `a::c::d`.
fn expand_use(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_owned()];
    };
    let close = tree.rfind('}').unwrap_or(tree.len());
    let (prefix, inner) = (&tree[..open], &tree[open + 1..close]);
    let (mut parts, mut depth, mut start) = (vec![], 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand_use(p).into_iter().map(|e| format!("{prefix}{e}")))
        .collect()
}

/// Every path in `code` with at least one `::`: from `use` trees and from the code.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut paths = vec![];
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        paths.extend(expand_use(&rest[..end].replace('\n', " ")));
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if word(bytes[i]) && (i == 0 || !(word(bytes[i - 1]) || bytes[i - 1] == ':')) {
            let mut j = i;
            while j < bytes.len() && (word(bytes[j]) || bytes[j] == ':') {
                j += 1;
            }
            let path: String = bytes[i..j].iter().collect();
            if path.contains("::") {
                paths.push(path);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    paths
        .into_iter()
        .map(|p| {
            p.split("::")
                .map(|s| s.split(" as ").next().unwrap_or("").trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect::<Vec<String>>()
        })
        .filter(|p| p.len() > 1)
        .collect()
}

/// The module files each file refers to.
fn references(
    files: &BTreeMap<ModPath, (PathBuf, String)>,
) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let deepest = |path: &[String]| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| files.contains_key(p))
    };
    let mut edges = BTreeMap::new();
    for (module, (_, text)) in files {
        let mut to = BTreeSet::new();
        for path in paths_in(&code_of(text)) {
            let Some(first) = path.first() else { continue };
            let (mut base, mut rest) = match first.as_str() {
                "crate" => (vec![], &path[1..]),
                "super" => (
                    module[..module.len().saturating_sub(1)].to_vec(),
                    &path[1..],
                ),
                "self" => (module.clone(), &path[1..]),
                _ => {
                    let mut child = module.clone();
                    child.push(first.clone());
                    if !files.contains_key(&child) {
                        continue;
                    }
                    (module.clone(), &path[..])
                }
            };
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            if let Some(target) = deepest(&base).filter(|t| t != module) {
                to.insert(target);
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// The strongly connected components of more than one node (Tarjan's algorithm).
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, (usize, usize)>,
        stack: Vec<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModPath) -> usize {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            let mut low = n;
            for w in self.edges.get(v).into_iter().flatten() {
                match self.index.get(w) {
                    None => low = low.min(self.visit(w)),
                    Some(&(i, _)) if self.stack.contains(&w) => low = low.min(i),
                    Some(_) => {}
                }
            }
            self.index.insert(v, (n, low));
            if low == n {
                let at = self.stack.iter().rposition(|s| *s == v).unwrap_or(0);
                let members: Vec<ModPath> = self.stack.drain(at..).cloned().collect();
                if members.len() > 1 {
                    self.found.push(members);
                }
            }
            low
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        stack: vec![],
        found: vec![],
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = vec![];
    let mut dirs: Vec<PathBuf> = ["src", "tests", "examples", "benches"]
        .iter()
        .map(|d| crate_dir.join(d))
        .collect();
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                seen += 1;
                let lines = std::fs::read_to_string(&path).map_or(0, |t| t.lines().count());
                if lines > MAX_LINES {
                    long.push(format!("{} ({lines} lines)", path.display()));
                }
            }
        }
    }
    assert!(seen > 100, "control: {seen} files read");
    assert!(long.is_empty(), "split along their seams: {long:#?}");
}

#[test]
fn no_import_circle_between_files_or_top_level_modules() {
    let files = source_files();
    let edges = references(&files);
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 300,
        "control: references read"
    );
    let between_files: BTreeMap<ModPath, BTreeSet<ModPath>> = edges
        .iter()
        .map(|(a, to)| {
            (
                a.clone(),
                to.iter().filter(|b| !related(a, b)).cloned().collect(),
            )
        })
        .collect();
    let mut top: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (a, to) in &edges {
        for b in to {
            if let (Some(x), Some(y)) = (a.first(), b.first()) {
                if x != y {
                    top.entry(vec![x.clone()])
                        .or_default()
                        .insert(vec![y.clone()]);
                }
            }
        }
    }
    let found: Vec<Vec<ModPath>> = circles(&between_files)
        .into_iter()
        .chain(circles(&top))
        .collect();
    assert!(found.is_empty(), "import circles: {found:?}");
}

/// The checks can fail: a circle and a long file made up here are found.
#[test]
fn a_circle_is_found() {
    let m = |s: &str| -> ModPath { s.split('/').map(str::to_owned).collect() };
    let edges = BTreeMap::from([
        (m("a/x"), BTreeSet::from([m("a/y")])),
        (m("a/y"), BTreeSet::from([m("a/z")])),
        (m("a/z"), BTreeSet::from([m("a/x")])),
        (m("b"), BTreeSet::from([m("a/x")])),
    ]);
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3);
    let code = code_of("use super::{seal, Call}; // crate::nothing\nlet s = \"crate::x::y\";");
    assert_eq!(
        paths_in(&code),
        vec![vec!["super", "seal"], vec!["super", "Call"]]
    );
}
