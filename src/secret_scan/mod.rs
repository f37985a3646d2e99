//! The scan behind the hidden-files rule: which files under a home's dot-entries (and
//! directly in the home, and where a dot-entry that is a link leads) only their owner may
//! read, and (as root) which files under `/etc` others may not read — found by their
//! modes, not their names. `policy::secrets` decides from a scan what a call hides.
//!
//! sandgate runs before every command, so the scan is bounded and cached:
//! - **Bounded.** Breadth first, shallow entries before deep ones, to [`MAX_DEPTH`] below
//!   the root, at most [`MAX_DIRS`] directories and [`MAX_ENTRIES`] entries; on the root's
//!   filesystem only; never through a symbolic link; never into a tree the caller names as
//!   skipped (the toolchain caches, installed toolchains: downloaded and unpacked software,
//!   readable by design). A scan that hit a bound says so ([`Snapshot::truncated`]).
//! - **Cached.** What a scan found is kept in `/tmp/sandgate-UID/` (`store`), a directory
//!   that is the caller's alone and that no sandbox can reach, with the identity and the
//!   change times of every directory it read. The next call stats those directories
//!   instead of reading them: a directory whose times or identity changed is read again
//!   (a file created, removed or renamed in it is seen at once), one that is gone is
//!   dropped, a new one below is scanned. A file's mode change (`chmod 600`) changes no
//!   directory, so the [`MAX_WATCHED`] files changed most recently in the hour before their
//!   directory was read are stat'ed at each call too (the usual `chmod` right after a tool
//!   wrote the file), and the whole scan is renewed when it is an hour old.
//! - **No race on the clock.** A directory or file whose times lie within [`RACY_NS`] of
//!   the moment it was read is recorded as changed, so that a change in the same tick of
//!   the file system's clock is not lost: it is looked at again at the next call.

pub mod store;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};

/// Entries deeper than this below the root are not looked at (a credential lies at most a
/// few levels down: `~/.config/gcloud/legacy_credentials/ACCOUNT/adc.json` is at depth 4).
pub const MAX_DEPTH: usize = 5;
/// Directories read at most in one scan.
pub const MAX_DIRS: usize = 2000;
/// Entries looked at most in one scan.
pub const MAX_ENTRIES: usize = 20_000;
/// Files changed this recently when their directory was read are stat'ed at every call.
const RECENT_NS: i64 = 3600 * 1_000_000_000;
/// At most this many of them: the newest.
const MAX_WATCHED: usize = 128;
/// A scan older than this is renewed whole.
pub const MAX_AGE_NS: i64 = 3600 * 1_000_000_000;
/// Times this close to the moment they were read may hide a change in the same tick.
const RACY_NS: i64 = 2_000_000_000;

/// What a scan looks at beneath its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A home: its dot-entries, and the files directly in it. A file counts when it is the
    /// caller's, only its owner may read it (no group or other read bit) and its owner may
    /// not run it (a private script is a program, not a credential); a directory of the
    /// caller's that nobody else may enter is taken whole, save the home itself and its
    /// XDG base directories.
    Home,
    /// A directory one of a home's dot-entries links to (`~/.vault -> ~/Sync/vault`, a
    /// `~/.config` kept in a dotfiles checkout): scanned as that dot-entry would be, so
    /// what a tool keeps there is judged as if it lay in the home. Its own mode counts
    /// (a closed one is taken whole) unless it stands for an XDG base directory (`Root::xdg`).
    LinkedEntry,
    /// A system directory (`/etc`): a file counts when others may not read it and the
    /// caller may (by its owner or group bits: a sandbox has no capability to read more);
    /// a directory others may not enter and the caller may is taken whole.
    System,
}

impl Scope {
    /// The depth its root counts as, for the bounds and the rule: a linked dot-entry's is
    /// that of a home's dot-entry.
    pub fn root_depth(self) -> usize {
        match self {
            Scope::LinkedEntry => 1,
            Scope::Home | Scope::System => 0,
        }
    }

    /// How the scope is named in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Home => "home",
            Scope::LinkedEntry => "linked-entry",
            Scope::System => "system",
        }
    }
}

/// One tree to scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Canonical.
    pub path: PathBuf,
    pub scope: Scope,
    /// Trees not looked into (absolute).
    pub skip: Vec<PathBuf>,
    /// A home's XDG base directories named by the caller's variables (`$XDG_CONFIG_HOME`
    /// and the like, canonical), besides the default ones (see [`Scope::Home`]).
    pub xdg: Vec<PathBuf>,
}

/// Who the files are judged for: the caller's effective uid and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub groups: Vec<u32>,
}

impl Caller {
    pub fn current() -> Caller {
        let mut groups: Vec<u32> = nix::unistd::getgroups()
            .unwrap_or_default()
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        groups.push(nix::unistd::getegid().as_raw());
        Caller {
            uid: nix::unistd::geteuid().as_raw(),
            groups,
        }
    }

    /// Whether the scope counts the regular file `st` as a secret.
    fn secret(&self, scope: Scope, st: &FileStat) -> bool {
        let mode = st.st_mode;
        match scope {
            Scope::Home | Scope::LinkedEntry => {
                st.st_uid == self.uid && mode & 0o400 != 0 && mode & 0o144 == 0
            }
            Scope::System => mode & 0o004 == 0 && self.may(st, 0o400, 0o040),
        }
    }

    /// Whether the scope hides the directory `st` whole: in a home, one of the caller's
    /// that nobody else may enter; in a system directory, one others may not enter and the
    /// caller may.
    fn closed(&self, scope: Scope, st: &FileStat) -> bool {
        match scope {
            Scope::Home | Scope::LinkedEntry => {
                st.st_uid == self.uid && st.st_mode & 0o100 != 0 && st.st_mode & 0o011 == 0
            }
            Scope::System => st.st_mode & 0o001 == 0 && self.may(st, 0o100, 0o010),
        }
    }

    /// Whether the owner bit `user` or the group bit `group` lets the caller in.
    fn may(&self, st: &FileStat, user: u32, group: u32) -> bool {
        (st.st_uid == self.uid && st.st_mode & user != 0)
            || (st.st_uid != self.uid
                && self.groups.contains(&st.st_gid)
                && st.st_mode & group != 0)
    }
}

/// A file, identified the way a change to its mode would show: inode and change time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub name: OsString,
    pub ino: u64,
    pub ctime: i64,
}

/// One directory the scan read (or, when `closed`, took whole without reading).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its name in its parent (the root's is empty).
    pub name: OsString,
    pub dev: u64,
    pub ino: u64,
    /// Modification and change times (ns), or 0 when they were too fresh to trust.
    pub mtime: i64,
    pub ctime: i64,
    /// Regular files directly in it (those of the scope: for a home's root, dot-files).
    pub files: u32,
    /// Its files that the scope counts as secrets.
    pub secret: Vec<OsString>,
    /// In a closed home directory, its other regular files: only their owner can reach
    /// them either, so they are hidden one by one when the directory cannot go whole.
    pub public: Vec<OsString>,
    /// Directories in it at the scan's last level (not recorded as nodes) that the scope
    /// takes whole.
    pub closed_below: Vec<OsString>,
    /// A bound stopped the scan before it had read all of this directory: what it holds is
    /// unknown, so it is hidden whole (fail closed) unless the call must see it.
    pub unread: bool,
    /// Others may not enter it: it is hidden whole. A system one is taken unread; a home's
    /// is read all the same, for when it cannot be hidden whole (it holds the workspace,
    /// or a path shown again) and its secrets are hidden one by one.
    pub closed: bool,
    /// Its other files that changed shortly before it was read.
    pub watched: Vec<Watched>,
    pub children: Vec<Node>,
}

impl Node {
    /// Calls `f` with each node and its path, parents before children.
    pub fn visit(&self, path: &Path, f: &mut impl FnMut(&Node, &Path)) {
        f(self, path);
        for child in &self.children {
            child.visit(&path.join(&child.name), f);
        }
    }

    fn count(&self) -> usize {
        1 + self.children.iter().map(Node::count).sum::<usize>()
    }
}

/// What one scan of a root found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub root: Root,
    /// When the whole tree was last scanned (ns since the epoch).
    pub walked: i64,
    /// A bound stopped the scan: deeper or further directories were not read.
    pub truncated: bool,
    pub tree: Node,
    /// How this call got it.
    pub source: Source,
}

/// How a call got its snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Scanned whole.
    Walked,
    /// From the cache, every directory unchanged.
    Cached,
    /// From the cache, with the directories that changed read again.
    Refreshed,
}

/// The snapshot of `root` for `caller`: the cached one, checked and brought up to date,
/// or a fresh scan; the result is cached again when it changed. A cache that cannot be
/// used is not an error: the scan is then made without it.
///
/// `anchors` are paths the call must see (the workspace, writable roots, `$PATH`
/// directories, paths shown again; canonical), which the rule therefore cannot hide
/// whole: the directories on the way to each, and each itself, are read whatever the
/// bounds (see [`Scan::reach`]). So are those on the way to the trees the scan skips (the
/// caches, which the call mounts).
pub fn snapshot(root: &Root, caller: &Caller, anchors: &[PathBuf]) -> Option<Snapshot> {
    let now = now_ns();
    let cached = store::load(root, caller);
    let anchors: Vec<&PathBuf> = anchors.iter().chain(&root.skip).collect();
    let mut snapshot = match cached {
        Some(mut old) if now - old.walked < MAX_AGE_NS => {
            let mut scan = Scan::new(root, caller, old.tree.count());
            match scan.refresh(&mut old.tree, &root.path, root.scope.root_depth()) {
                Kept::Same => {
                    scan.reach(&mut old.tree, &anchors);
                    if !scan.changed {
                        old.source = Source::Cached;
                        return Some(old);
                    }
                    old.truncated |= scan.truncated;
                    old.source = Source::Refreshed;
                    old
                }
                Kept::Gone => walk(root, caller, &anchors)?,
            }
        }
        _ => walk(root, caller, &anchors)?,
    };
    limit_watched(&mut snapshot.tree);
    store::save(&snapshot, caller);
    Some(snapshot)
}

/// Scans `root` whole, and the way to each of `anchors` (see [`snapshot`]); `None` when the
/// root itself cannot be read as a directory.
pub fn walk(root: &Root, caller: &Caller, anchors: &[&PathBuf]) -> Option<Snapshot> {
    let mut scan = Scan::new(root, caller, 0);
    let st = nix::sys::stat::lstat(&root.path).ok()?;
    let mut tree = scan.subtree(&root.path, OsString::new(), &st, root.scope.root_depth())?;
    scan.reach(&mut tree, anchors);
    Some(Snapshot {
        root: root.clone(),
        walked: scan.now,
        truncated: scan.truncated,
        tree,
        source: Source::Walked,
    })
}

/// One scan or refresh in progress.
struct Scan<'a> {
    root: &'a Root,
    caller: &'a Caller,
    /// The root's file system: nothing on another is looked at.
    dev: u64,
    now: i64,
    dirs: usize,
    entries: usize,
    /// Entries of directories read again (see [`Scan::read_again`]).
    entries_again: usize,
    truncated: bool,
    /// A refresh found something different.
    changed: bool,
}

/// Whether a recorded directory is still the one recorded.
#[derive(Debug, PartialEq, Eq)]
enum Kept {
    Same,
    Gone,
}

/// What reading one directory found.
struct Listing {
    files: u32,
    secret: Vec<OsString>,
    /// The other regular files.
    public: Vec<OsString>,
    closed_below: Vec<OsString>,
    /// A bound stopped the reading midway.
    partial: bool,
    watched: Vec<Watched>,
    /// Directories to record beneath it, with their own stat.
    dirs: Vec<(OsString, FileStat)>,
}

impl<'a> Scan<'a> {
    fn new(root: &'a Root, caller: &'a Caller, dirs: usize) -> Scan<'a> {
        Scan {
            root,
            caller,
            dev: nix::sys::stat::lstat(&root.path)
                .map(|st| st.st_dev)
                .unwrap_or(u64::MAX),
            now: now_ns(),
            dirs,
            entries: 0,
            entries_again: 0,
            truncated: false,
            changed: false,
        }
    }

    /// Scans the directory at `path` (`st`, its lstat) at `depth`, breadth first within
    /// the bounds; `None` when it is not a directory on the root's file system.
    fn subtree(
        &mut self,
        path: &Path,
        name: OsString,
        st: &FileStat,
        depth: usize,
    ) -> Option<Node> {
        if !is_dir(st) || st.st_dev != self.dev {
            return None;
        }
        let mut top = self.node(name, st, path);
        // Breadth first: each level of the subtree is read before the next, so a bound
        // cuts off the deepest directories, not a whole branch beside a shallow secret.
        let mut level: Vec<(Vec<usize>, PathBuf)> = vec![(vec![], path.to_path_buf())];
        let mut depth = depth;
        while !level.is_empty() {
            let mut next = Vec::new();
            for (route, dir) in level {
                let Some(node) = descend(&mut top, &route) else {
                    continue;
                };
                if self.unread(node) {
                    continue;
                }
                let Some(listing) = self.read(&dir, depth) else {
                    node.unread = self.out_of_budget();
                    continue;
                };
                node.files = listing.files;
                node.secret = listing.secret;
                node.public = self.kept_public(node.closed, listing.public);
                node.closed_below = listing.closed_below;
                node.unread = listing.partial;
                node.watched = listing.watched;
                for (child, st) in listing.dirs {
                    let mut route = route.clone();
                    route.push(node.children.len());
                    let path = dir.join(&child);
                    node.children.push(self.node(child, &st, &path));
                    next.push((route, path));
                }
            }
            level = next;
            depth += 1;
        }
        Some(top)
    }

    /// A node for the directory `st` at `path`, not yet read.
    fn node(&self, name: OsString, st: &FileStat, path: &Path) -> Node {
        Node {
            name,
            dev: st.st_dev,
            ino: st.st_ino,
            mtime: self.settled(st.st_mtime, st.st_mtime_nsec),
            ctime: self.settled(st.st_ctime, st.st_ctime_nsec),
            files: 0,
            secret: vec![],
            closed: self.closes(st, path),
            public: vec![],
            closed_below: vec![],
            unread: false,
            watched: vec![],
            children: vec![],
        }
    }

    /// Whether the scope takes the directory `st` at `path` whole.
    fn closes(&self, st: &FileStat, path: &Path) -> bool {
        self.caller.closed(self.root.scope, st) && !self.mode_says_nothing(path)
    }

    /// Whether the mode of the home's directory at `path` says nothing about what it
    /// holds: the home itself (homes are commonly 0700), and the XDG base directories of a home
    /// (`~/.config`, `~/.cache`, `~/.local` and the directories in it), which libraries
    /// create 0700 as a matter of course, holding what every tool reads.
    fn mode_says_nothing(&self, path: &Path) -> bool {
        if self.root.xdg.iter().any(|d| d == path) {
            return true;
        }
        if self.root.scope != Scope::Home {
            return false;
        }
        let Ok(inside) = path.strip_prefix(&self.root.path) else {
            return true;
        };
        let mut names = inside.iter();
        match (names.next(), names.next(), names.next()) {
            (None, ..) => true,
            (Some(top), None, _) => [".config", ".cache", ".local"]
                .map(OsStr::new)
                .contains(&top),
            (Some(top), Some(_), None) => top == ".local",
            _ => false,
        }
    }

    /// Whether `node` is taken whole without being read.
    fn unread(&self, node: &Node) -> bool {
        node.closed && self.root.scope == Scope::System
    }

    /// A time as recorded: 0 when it lies so close to now that a change in the same tick
    /// could still follow unseen (the next call then looks again).
    fn settled(&self, sec: i64, nsec: i64) -> i64 {
        let t = sec.saturating_mul(1_000_000_000).saturating_add(nsec);
        if t > self.now - RACY_NS {
            0
        } else {
            t
        }
    }

    /// The other files of a directory, kept for a closed home directory only.
    fn kept_public(&self, closed: bool, public: Vec<OsString>) -> Vec<OsString> {
        if closed && self.root.scope != Scope::System {
            public
        } else {
            vec![]
        }
    }

    /// Reads the directories on the way from the root to each of `anchors`, and each
    /// itself, that the bounds left unread, without counting them against the bounds (but
    /// with a budget of the bounds' size for each). The rule hides an unread directory
    /// whole, unless it holds a path the call must see: such a directory must be known,
    /// or whatever lies beside that path would read. What they hold beside the way is
    /// recorded unread, and hidden whole. A tree made to use up the bounds (thousands of
    /// directories in a workspace) thus cannot uncover what lies beside a needed path.
    fn reach(&mut self, tree: &mut Node, anchors: &[&PathBuf]) {
        for anchor in anchors {
            let Ok(inside) = anchor.strip_prefix(&self.root.path) else {
                continue;
            };
            let mut names = inside.iter();
            let mut node = &mut *tree;
            let mut path = self.root.path.clone();
            for depth in self.root.scope.root_depth().. {
                if node.unread {
                    self.read_exempt(node, &path, depth);
                }
                let Some(name) = names.next() else {
                    break;
                };
                let Some(i) = node.children.iter().position(|c| c.name == name) else {
                    break;
                };
                node = &mut node.children[i];
                path.push(name);
            }
        }
    }

    /// Reads the directory `node` at `path` outside the scan's bounds (see [`Scan::reach`]).
    fn read_exempt(&mut self, node: &mut Node, path: &Path, depth: usize) {
        let spent = (self.dirs, self.entries, self.truncated);
        (self.dirs, self.entries) = (0, 0);
        let listing = self.read(path, depth);
        let partial = self.out_of_budget();
        (self.dirs, self.entries, self.truncated) = spent;
        let Some(listing) = listing else {
            return;
        };
        self.changed = true;
        node.files = listing.files;
        node.secret = listing.secret;
        node.public = self.kept_public(node.closed, listing.public);
        node.closed_below = listing.closed_below;
        node.unread = listing.partial || partial;
        node.watched = listing.watched;
        for (name, st) in listing.dirs {
            if !node
                .children
                .iter()
                .any(|c| c.name == name && c.ino == st.st_ino)
            {
                let child = path.join(&name);
                let mut fresh = self.node(name, &st, &child);
                fresh.unread = true;
                node.children.push(fresh);
            }
        }
    }

    /// Reads again the directory at `path`, which an earlier scan read: that spends
    /// nothing of the bounds, which limit how far a scan reaches, not how often it looks
    /// at what it reached (its entries count against an allowance of their own). (Otherwise, once a flood elsewhere had spent it,
    /// a directory whose times were too fresh to trust would be taken as unread, and
    /// hidden whole: `~/.config/git` lost to a workspace full of directories.)
    /// Returns the listing, and whether that allowance is spent.
    fn read_again(&mut self, path: &Path, depth: usize) -> (Option<Listing>, bool) {
        let dirs = std::mem::take(&mut self.dirs);
        // Entries read again are counted apart, against an allowance of the bound's size.
        std::mem::swap(&mut self.entries, &mut self.entries_again);
        let listing = self.read(path, depth);
        let spent = self.out_of_budget();
        std::mem::swap(&mut self.entries, &mut self.entries_again);
        self.dirs = dirs;
        (listing, spent)
    }

    /// Whether a bound has stopped the scan.
    fn out_of_budget(&self) -> bool {
        self.dirs >= MAX_DIRS || self.entries >= MAX_ENTRIES
    }

    /// Reads one directory at `depth`: its files, judged, and the directories beneath it
    /// that the bounds let in. `None` when it cannot be opened as a directory without
    /// following a link, or the bounds are used up.
    fn read(&mut self, dir: &Path, depth: usize) -> Option<Listing> {
        if self.out_of_budget() {
            self.truncated = true;
            return None;
        }
        self.dirs += 1;
        let mut entries = nix::dir::Dir::from_fd(open_dir(dir).ok()?).ok()?;
        let names: Vec<OsString> = entries
            .iter()
            .filter_map(|e| Some(OsStr::from_bytes(e.ok()?.file_name().to_bytes()).to_owned()))
            .collect();
        let mut listing = Listing {
            files: 0,
            secret: vec![],
            public: vec![],
            closed_below: vec![],
            partial: false,
            watched: vec![],
            dirs: vec![],
        };
        for name in &names {
            let name = name.as_os_str();
            if name == "." || name == ".." {
                continue;
            }
            // Directly in a home: the dot-entries, and the files (a downloaded key); not
            // the other directories (projects).
            let beyond_scope =
                self.root.scope == Scope::Home && depth == 0 && !name.as_bytes().starts_with(b".");
            if self.entries >= MAX_ENTRIES {
                self.truncated = true;
                listing.partial = true;
                break;
            }
            self.entries += 1;
            let Ok(st) = nix::sys::stat::fstatat(&entries, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            if st.st_dev != self.dev || (beyond_scope && is_dir(&st)) {
                continue;
            }
            if is_dir(&st) {
                let path = dir.join(name);
                if self.root.skip.contains(&path) {
                } else if depth + 1 < MAX_DEPTH {
                    listing.dirs.push((name.to_owned(), st));
                } else if self.closes(&st, &path) {
                    listing.closed_below.push(name.to_owned());
                } else {
                    self.watch_if_recent(&mut listing, name, &st);
                }
            } else if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                listing.files += 1;
                if self.caller.secret(self.root.scope, &st) {
                    listing.secret.push(name.to_owned());
                } else {
                    listing.public.push(name.to_owned());
                    self.watch_if_recent(&mut listing, name, &st);
                }
            }
        }
        listing.secret.sort();
        listing.closed_below.sort();
        listing.public.sort();
        listing.dirs.sort_by(|a, b| a.0.cmp(&b.0));
        Some(listing)
    }

    /// Records the entry `name` (`st`) among those stat'ed at every call when it changed
    /// within the hour: a `chmod` changes no directory, only the entry's own change time.
    fn watch_if_recent(&self, listing: &mut Listing, name: &OsStr, st: &FileStat) {
        if nanos(st.st_ctime, st.st_ctime_nsec) > self.now - RECENT_NS {
            listing.watched.push(Watched {
                name: name.to_owned(),
                ino: st.st_ino,
                ctime: self.settled(st.st_ctime, st.st_ctime_nsec),
            });
        }
    }

    /// Checks the recorded directory `node` at `path` against what is there now and brings
    /// it up to date: read again when it changed, scanned anew beneath where new
    /// directories appeared.
    fn refresh(&mut self, node: &mut Node, path: &Path, depth: usize) -> Kept {
        let st = match nix::sys::stat::lstat(path) {
            Ok(st) if is_dir(&st) && (st.st_dev, st.st_ino) == (node.dev, node.ino) => st,
            _ => {
                self.changed = true;
                return Kept::Gone;
            }
        };
        let times = (
            nanos(st.st_mtime, st.st_mtime_nsec),
            nanos(st.st_ctime, st.st_ctime_nsec),
        );
        let dirty = node.unread
            || times != (node.mtime, node.ctime)
            || node.watched.iter().any(|w| {
                nix::sys::stat::lstat(&path.join(&w.name)).map_or(true, |f| {
                    f.st_ino != w.ino || nanos(f.st_ctime, f.st_ctime_nsec) != w.ctime
                })
            });
        if !dirty {
            let before = node.children.len();
            node.children.retain_mut(|child| {
                self.refresh(child, &path.join(&child.name), depth + 1) == Kept::Same
            });
            if node.children.len() == before {
                return Kept::Same;
            }
            // A directory went without its parent changing: read the parent again.
        }
        self.changed = true;
        let mut fresh = self.node(std::mem::take(&mut node.name), &st, path);
        if self.unread(&fresh) {
            *node = fresh;
            return Kept::Same;
        }
        let (listing, spent) = match node.unread {
            true => {
                self.dirs = self.dirs.saturating_sub(1);
                let listing = self.read(path, depth);
                (listing, self.out_of_budget())
            }
            false => self.read_again(path, depth),
        };
        let Some(listing) = listing else {
            // Not read for a bound: unknown, so hidden whole (fail closed).
            fresh.unread = spent;
            *node = fresh;
            return Kept::Same;
        };
        fresh.files = listing.files;
        fresh.secret = listing.secret;
        fresh.public = self.kept_public(fresh.closed, listing.public);
        fresh.closed_below = listing.closed_below;
        fresh.unread = listing.partial;
        fresh.watched = listing.watched;
        let mut old: Vec<Node> = std::mem::take(&mut node.children);
        for (name, st) in listing.dirs {
            let child_path = path.join(&name);
            let kept = old
                .iter()
                .position(|c| c.name == name && (c.dev, c.ino) == (st.st_dev, st.st_ino))
                .map(|i| old.swap_remove(i));
            match kept {
                Some(mut child) => {
                    if self.refresh(&mut child, &child_path, depth + 1) == Kept::Same {
                        fresh.children.push(child);
                    }
                }
                None => {
                    if let Some(child) = self.subtree(&child_path, name, &st, depth + 1) {
                        fresh.children.push(child);
                    }
                }
            }
        }
        // Directories no longer there, or replaced, leave the count they held.
        self.dirs = self
            .dirs
            .saturating_sub(old.iter().map(Node::count).sum::<usize>());
        *node = fresh;
        Kept::Same
    }
}

/// Opens the directory `path` for reading, refusing a symbolic link anywhere in it: a link
/// swapped in since the parent was read must not lead the scan elsewhere.
fn open_dir(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{openat2, OpenHow, ResolveFlag, AT_FDCWD};
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    match openat2(AT_FDCWD, path, how) {
        // Inside a sandbox openat2 is refused: the same check, one component at a time.
        Err(nix::errno::Errno::ENOSYS) => {
            let exact = crate::no_symlinks::open(path)?;
            Ok(nix::fcntl::openat(&exact, ".", flags, Mode::empty())?)
        }
        other => Ok(other?),
    }
}

/// The node at `route` (child indices from `top`).
fn descend<'n>(top: &'n mut Node, route: &[usize]) -> Option<&'n mut Node> {
    let mut node = top;
    for i in route {
        node = node.children.get_mut(*i)?;
    }
    Some(node)
}

/// Keeps the [`MAX_WATCHED`] most recently changed watched files of the tree (those whose
/// time was too fresh to record first), however many share a time: a file system's clock
/// ticks in milliseconds, and a tool writes hundreds of files within one tick.
fn limit_watched(tree: &mut Node) {
    let mut times = Vec::new();
    collect_watched(tree, &mut times);
    if times.len() <= MAX_WATCHED {
        return;
    }
    times.sort_unstable_by(|a, b| b.cmp(a));
    let cut = times[MAX_WATCHED - 1];
    // Every file newer than the cut, and as many at the cut as there is room left for.
    let mut ties = MAX_WATCHED - times.iter().take_while(|t| **t > cut).count();
    drop_watched(tree, cut, &mut ties);
}

/// A watched file's time for [`limit_watched`]: a too-fresh one (recorded as 0) counts as
/// the newest.
fn recency(w: &Watched) -> i64 {
    if w.ctime == 0 {
        i64::MAX
    } else {
        w.ctime
    }
}

fn collect_watched(node: &Node, out: &mut Vec<i64>) {
    out.extend(node.watched.iter().map(recency));
    for child in &node.children {
        collect_watched(child, out);
    }
}

fn drop_watched(node: &mut Node, cut: i64, ties: &mut usize) {
    node.watched.retain(|w| {
        let t = recency(w);
        if t > cut {
            return true;
        }
        if t == cut && *ties > 0 {
            *ties -= 1;
            return true;
        }
        false
    });
    for child in &mut node.children {
        drop_watched(child, cut, ties);
    }
}

fn is_dir(st: &FileStat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

fn nanos(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// Now, in ns since the epoch (the clock file times are kept in).
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
