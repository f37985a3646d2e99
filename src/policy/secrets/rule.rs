//! The hidden-files rule for one call: what the scans (`secret_scan`) found, turned into
//! paths that read as empty, each with its reason.
//!
//! A directory the scan found closed — in a home, one only its owner may enter — is hidden
//! whole, unless it holds a path the call needs to see or the user shows again. Then what
//! it holds is hidden piece by piece, since only its owner can reach any of it: its files,
//! and its directories that hold nothing needed, whole — but not what lies in the needed
//! path itself (the tools in a `~/.TOOL/bin` on `$PATH`).
//!
//! Every mask is a mount, so a directory holding many secrets is hidden as one empty
//! directory rather than one mount per file: in a home, a directory at least two levels
//! down whose files (counted to the scan's depth) are mostly secrets — at least
//! [`COLLAPSE_MIN`] of them and more than half — or that holds at least [`COLLAPSE_MAX`]
//! of them, is hidden whole. Such a directory is an application's private store (a browser
//! profile, a keyring, a mail store): what it holds besides is that application's state
//! too. Never hidden whole: the home itself, its dot-entries (`~/.config`, `~/.local`,
//! `~/.cache` hold what every tool reads), the directories of `~/.local` (XDG's own tree),
//! and any directory that holds a path the call needs to see (the workspace, a writable
//! root, a copy-on-write cache, a directory on `PATH`) or that the user shows again. Their
//! secrets are hidden one by one instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Why;
use crate::secret_scan::{Node, Scope, Snapshot};

/// A directory with at least this many secrets, more than half of its files, is hidden
/// whole.
pub const COLLAPSE_MIN: u32 = 4;
/// A directory with this many secrets is hidden whole whatever else it holds: past this,
/// one mount per file costs more than a millisecond at every call.
pub const COLLAPSE_MAX: u32 = 32;

/// The paths the scans say to hide. `keep_whole` are paths the call needs visible: no
/// directory holding one is hidden whole. `shown` are paths the user shows again: nothing
/// at or beneath one is hidden, and no directory holding one is hidden whole.
pub fn found(
    snapshots: &[Snapshot],
    keep_whole: &[PathBuf],
    shown: &[PathBuf],
) -> BTreeMap<PathBuf, Why> {
    let mut out = BTreeMap::new();
    for snapshot in snapshots {
        let walk = Walk {
            home: &snapshot.root.path,
            scope: snapshot.root.scope,
            xdg: &snapshot.root.xdg,
            keep_whole,
            shown,
        };
        let depth = snapshot.root.scope.root_depth();
        walk.visit(&snapshot.tree, &snapshot.root.path, depth, false, &mut out);
    }
    out
}

struct Walk<'a> {
    /// The scan's root: a home, or the directory a home's dot-entry links to.
    home: &'a Path,
    scope: Scope,
    /// Directories never hidden whole for their mode or their secrets (see
    /// `secret_scan::Root::xdg`).
    xdg: &'a [PathBuf],
    keep_whole: &'a [PathBuf],
    shown: &'a [PathBuf],
}

impl Walk<'_> {
    /// Hides what `node` at `path` holds; `enclosed`: it lies in a closed directory that
    /// could not be hidden whole, so only its owner can reach anything in it.
    fn visit(
        &self,
        node: &Node,
        path: &Path,
        depth: usize,
        enclosed: bool,
        out: &mut BTreeMap<PathBuf, Why>,
    ) {
        if self.is_shown(path) {
            return;
        }
        let whole = depth > 0 && !self.holds_needed(path);
        if whole && (node.closed || enclosed) {
            out.insert(path.to_path_buf(), Why::ClosedToOthers);
            return;
        }
        // Fail closed: what a bound kept the scan from reading may hold anything. Many
        // such directories side by side (a tree made to use up the bounds) go as one.
        let unread = node.children.iter().filter(|c| c.unread).count();
        if whole && (node.unread || unread >= COLLAPSE_MAX as usize) {
            out.insert(path.to_path_buf(), Why::Unscanned);
            return;
        }
        for name in &node.closed_below {
            let dir = path.join(name);
            if !self.is_shown(&dir) && !self.holds_needed(&dir) {
                out.insert(dir, Why::ClosedToOthers);
            }
        }
        if whole && self.may_collapse(path, depth) {
            let (secrets, files) = totals(node);
            if (secrets >= COLLAPSE_MIN && 2 * secrets > files) || secrets >= COLLAPSE_MAX {
                out.insert(
                    path.to_path_buf(),
                    Why::OwnerOnlyFiles {
                        owner_only: secrets,
                        files,
                    },
                );
                return;
            }
        }
        let why = match self.scope {
            Scope::Home | Scope::LinkedEntry => Why::OwnerOnly,
            Scope::System => Why::NotForOthers,
        };
        let enclosed = (enclosed || node.closed) && !self.within_needed(path);
        let public = node.public.iter().filter(|_| enclosed);
        for (name, why) in node
            .secret
            .iter()
            .map(|n| (n, why.clone()))
            .chain(public.map(|n| (n, Why::InClosedDirectory)))
        {
            let file = path.join(name);
            if !self.is_shown(&file) {
                out.insert(file, why);
            }
        }
        for child in &node.children {
            self.visit(child, &path.join(&child.name), depth + 1, enclosed, out);
        }
    }

    /// Whether `path` is or lies in a path the call must see as it is (a `$PATH`
    /// directory, a cache): what it holds is not hidden for lying in a closed directory.
    fn within_needed(&self, path: &Path) -> bool {
        self.keep_whole.iter().any(|k| path.starts_with(k))
    }

    fn is_shown(&self, path: &Path) -> bool {
        self.shown.iter().any(|s| path.starts_with(s))
    }

    /// Whether the directory `path` holds a path that must stay visible.
    fn holds_needed(&self, path: &Path) -> bool {
        self.keep_whole
            .iter()
            .chain(self.shown)
            .any(|p| p.starts_with(path))
    }

    /// Whether the home directory `path` at `depth` may be hidden whole (see the module
    /// docs); a system directory is hidden whole only when others may not enter it.
    fn may_collapse(&self, path: &Path, depth: usize) -> bool {
        self.scope != Scope::System
            && depth >= 2
            && !self.xdg.iter().any(|d| d == path)
            && !(depth == 2 && path.parent() == Some(&self.home.join(".local")))
    }
}

/// The secrets and the files in `node`'s subtree, as far as the scan looked.
fn totals(node: &Node) -> (u32, u32) {
    node.children.iter().map(totals).fold(
        (
            u32::try_from(node.secret.len()).unwrap_or(u32::MAX),
            node.files,
        ),
        |(s, f), (cs, cf)| (s.saturating_add(cs), f.saturating_add(cf)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret_scan::{Root, Source};
    use std::ffi::OsString;

    fn dir(name: &str, files: u32, secret: &[&str], children: Vec<Node>) -> Node {
        Node {
            name: name.into(),
            dev: 1,
            ino: 1,
            mtime: 0,
            ctime: 0,
            files,
            secret: secret.iter().map(OsString::from).collect(),
            public: vec![],
            closed_below: vec![],
            unread: false,
            closed: false,
            watched: vec![],
            children,
        }
    }

    fn home_snapshot(tree: Node) -> Snapshot {
        Snapshot {
            root: Root {
                path: "/h".into(),
                scope: Scope::Home,
                skip: vec![],
                xdg: vec![],
            },
            walked: 0,
            truncated: false,
            tree,
            source: Source::Walked,
        }
    }

    fn linked_snapshot(tree: Node, xdg: bool) -> Snapshot {
        let mut snapshot = home_snapshot(tree);
        snapshot.root.path = "/elsewhere/vault".into();
        snapshot.root.scope = Scope::LinkedEntry;
        if xdg {
            snapshot.root.xdg = vec!["/elsewhere/vault".into()];
        }
        snapshot
    }

    #[test]
    fn a_linked_dot_entry_is_judged_as_a_dot_entry() {
        let closed = || Node {
            closed: true,
            ..dir(
                "",
                3,
                &["key"],
                vec![dir("sub", 5, &["a", "b", "c", "d"], vec![])],
            )
        };
        // Closed: hidden whole, as a closed dot-entry is.
        let found_closed = found(&[linked_snapshot(closed(), false)], &[], &[]);
        assert_eq!(
            found_closed.into_iter().collect::<Vec<_>>(),
            [("/elsewhere/vault".into(), Why::ClosedToOthers)]
        );
        // Standing in for an XDG base directory, or holding the workspace: never whole,
        // its secrets one by one, and a store of them (two levels down) as one.
        let open = || Node {
            closed: false,
            ..closed()
        };
        for (snapshot, keep) in [
            (linked_snapshot(open(), true), vec![]),
            (
                linked_snapshot(closed(), false),
                vec![PathBuf::from("/elsewhere/vault/ws")],
            ),
        ] {
            let hidden: Vec<PathBuf> = found(&[snapshot], &keep, &[]).into_keys().collect();
            assert!(
                hidden.contains(&"/elsewhere/vault/key".into()),
                "{hidden:?}"
            );
            assert!(
                hidden.contains(&"/elsewhere/vault/sub".into()),
                "{hidden:?}"
            );
            assert!(!hidden.contains(&"/elsewhere/vault".into()), "{hidden:?}");
        }
    }

    fn many(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("f{i}")).collect()
    }

    #[test]
    fn a_store_of_secrets_is_hidden_whole_and_a_lone_secret_by_itself() {
        let profile_files = many(300);
        let profile: Vec<&str> = profile_files.iter().map(String::as_str).collect();
        let tree = dir(
            "",
            2,
            &[".pgpass"],
            vec![
                dir(
                    ".config",
                    1,
                    &[],
                    vec![
                        dir(
                            "browser",
                            1,
                            &[],
                            vec![dir("Default", 310, &profile, vec![])],
                        ),
                        dir("app", 2, &["credentials.json"], vec![]),
                        dir("tool", 6, &["a", "b", "c", "d"], vec![]),
                    ],
                ),
                dir(".foo", 5, &["token", "t2", "t3", "t4", "t5"], vec![]),
                dir(
                    ".local",
                    0,
                    &[],
                    vec![dir("share", 5, &["a", "b", "c", "d", "e"], vec![])],
                ),
            ],
        );
        let found = found(&[home_snapshot(tree)], &[], &[]);
        let shown: Vec<(&str, &Why)> = found
            .iter()
            .map(|(p, w)| (p.to_str().unwrap_or_default(), w))
            .collect();
        assert_eq!(
            shown[..4],
            [
                ("/h/.config/app/credentials.json", &Why::OwnerOnly),
                (
                    "/h/.config/browser",
                    &Why::OwnerOnlyFiles {
                        owner_only: 300,
                        files: 311
                    }
                ),
                (
                    "/h/.config/tool",
                    &Why::OwnerOnlyFiles {
                        owner_only: 4,
                        files: 6
                    }
                ),
                ("/h/.foo/t2", &Why::OwnerOnly),
            ]
        );
        // A dot-entry and a directory of ~/.local are never hidden whole.
        assert!(found.contains_key(Path::new("/h/.foo/token")));
        assert!(!found.contains_key(Path::new("/h/.foo")));
        assert!(found.contains_key(Path::new("/h/.local/share/e")));
        assert!(!found.contains_key(Path::new("/h/.local/share")));
        assert!(found.contains_key(Path::new("/h/.pgpass")));
    }

    #[test]
    fn what_the_call_needs_or_the_user_shows_is_never_hidden_whole() {
        let tree = || {
            dir(
                "",
                0,
                &[],
                vec![dir(
                    ".config",
                    0,
                    &[],
                    vec![dir(
                        "store",
                        8,
                        &["a", "b", "c", "d", "e"],
                        vec![dir("ws", 0, &[], vec![])],
                    )],
                )],
            )
        };
        let snapshots = [home_snapshot(tree())];
        let collapsed = found(&snapshots, &[], &[]);
        assert_eq!(collapsed.len(), 1, "{collapsed:?}");
        let kept = found(&snapshots, &[PathBuf::from("/h/.config/store/ws")], &[]);
        assert_eq!(kept.len(), 5, "{kept:?}");
        let shown = found(&snapshots, &[], &[PathBuf::from("/h/.config/store/a")]);
        assert_eq!(
            shown.keys().collect::<Vec<_>>(),
            [
                "/h/.config/store/b",
                "/h/.config/store/c",
                "/h/.config/store/d",
                "/h/.config/store/e"
            ]
        );
        assert!(found(&snapshots, &[], &[PathBuf::from("/h/.config")]).is_empty());
    }

    #[test]
    fn a_system_directory_others_may_not_enter_is_hidden_whole() {
        let mut private = dir("private", 0, &[], vec![]);
        private.closed = true;
        let tree = dir("", 3, &["shadow"], vec![dir("ssl", 1, &[], vec![private])]);
        let snapshot = Snapshot {
            root: Root {
                path: "/etc".into(),
                scope: Scope::System,
                skip: vec![],
                xdg: vec![],
            },
            ..home_snapshot(tree)
        };
        let found = found(&[snapshot], &[], &[]);
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            [
                (PathBuf::from("/etc/shadow"), Why::NotForOthers),
                (PathBuf::from("/etc/ssl/private"), Why::ClosedToOthers)
            ]
        );
    }

    #[test]
    fn what_a_bound_left_unread_is_hidden_unless_the_call_needs_it() {
        let unread = |name: &str| Node {
            unread: true,
            ..dir(name, 0, &[], vec![])
        };
        let flood: Vec<Node> = (0..COLLAPSE_MAX)
            .map(|i| unread(&format!("d{i}")))
            .collect();
        let mut deep = dir("deeper", 1, &[], vec![]);
        deep.closed_below = vec!["vault".into(), "ws-parent".into()];
        let tree = dir(
            "",
            0,
            &[],
            vec![dir(
                ".config",
                0,
                &[],
                vec![
                    dir("flooded", 0, &[], flood),
                    dir("sops", 0, &[], vec![unread("age")]),
                    dir("work", 0, &[], vec![unread("ws")]),
                    deep,
                ],
            )],
        );
        let keep = [
            PathBuf::from("/h/.config/work/ws"),
            PathBuf::from("/h/.config/deeper/ws-parent/x"),
        ];
        let found = found(&[home_snapshot(tree)], &keep, &[]);
        let at = |p: &str| found.get(Path::new(p));
        assert_eq!(at("/h/.config/flooded"), Some(&Why::Unscanned));
        assert_eq!(at("/h/.config/sops/age"), Some(&Why::Unscanned));
        assert_eq!(at("/h/.config/deeper/vault"), Some(&Why::ClosedToOthers));
        assert_eq!(at("/h/.config/work/ws"), None);
        assert_eq!(at("/h/.config/deeper/ws-parent"), None);
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[test]
    fn a_closed_directory_holding_a_needed_path_hides_all_else_it_holds() {
        let mut tool = dir(
            ".tool",
            2,
            &["key"],
            vec![dir("bin", 1, &[], vec![]), dir("state", 1, &[], vec![])],
        );
        tool.closed = true;
        tool.public = vec!["config.yml".into()];
        tool.children[0].public = vec!["tool".into()];
        let found = found(
            &[home_snapshot(dir("", 0, &[], vec![tool]))],
            &[PathBuf::from("/h/.tool/bin")],
            &[],
        );
        let expected: BTreeMap<PathBuf, Why> = [
            ("/h/.tool/config.yml", Why::InClosedDirectory),
            ("/h/.tool/key", Why::OwnerOnly),
            ("/h/.tool/state", Why::ClosedToOthers),
        ]
        .into_iter()
        .map(|(p, w)| (PathBuf::from(p), w))
        .collect();
        assert_eq!(found, expected);
    }
}
