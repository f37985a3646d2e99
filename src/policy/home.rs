//! The caller's home directories, and what keeps the files a later login runs out of a
//! sandbox's reach.
//!
//! A home has two names that matter: `$HOME` and the passwd entry's directory. They differ
//! under `sudo -E`, in containers and in tests; a shell started later may use either, so
//! both are guarded.
//!
//! A persistence path (`~/.bashrc`, `~/.local/bin`, …) inside a writable root is guarded
//! whether or not it exists when the call starts:
//! - an existing one is bound read-only (and so cannot be replaced, renamed or removed);
//! - a missing one cannot be created because the deepest directory that does exist on its
//!   way is *frozen*: bound read-only, with its other entries bound writable again, so
//!   nothing can be added to it, removed from it or renamed in it;
//! - a symbolic link on the way is treated like a missing name (its directory is frozen,
//!   so the link cannot be swapped) and its target is guarded in turn;
//! - every directory on the way is *pinned* (bound onto itself), so no ancestor can be
//!   renamed aside and replaced by a fresh tree with startup files of the sandbox's own.
//!
//! A home that a writable root holds (the workspace is the home, or holds it, or a
//! `--writable-root` does) is *sealed* besides, by rule rather than by list ([`seal`]):
//! - every dot-entry directly in it (`~/.local`, `~/.config`, `~/.cargo`, `~/.pyenv`,
//!   `~/.profile`, …) stays read-only;
//! - so does, whole, every other *top-level entry* of the home that holds a directory on
//!   `$PATH` (`~/venv` for `~/venv/bin`, with its `lib/python3.*/site-packages`) or a path
//!   that one of the home's startup files names (`~/miniconda3` when `.bashrc` sources
//!   `~/miniconda3/etc/profile.d/conda.sh`). A startup file is a dot-file directly in the
//!   home but a history (`.vimrc`, `.tmux.conf`), or a persistence path of the home (a
//!   file, or the files in such a directory: fish's `conf.d`, systemd's units); a name is
//!   any word in it that, after a leading `~/`, `$HOME`, `${HOME}` or `%h` is expanded and
//!   quotes are stripped, is an absolute path in the home. The files so named are read in
//!   turn, so that what they pull in is covered too. Reading is bounded and never fails the
//!   call: a file that cannot be read names nothing, and when the bound stops the reading
//!   every entry of the home is sealed;
//! - the home is frozen, so no new entry (a new `~/.pythonrc`) appears in it.
//!
//! What a host program runs later — a `.pth` in a virtual environment's or
//! `~/.local/lib/python3.*`'s site-packages, `~/.cargo/bin`, pyenv's shims, a shell's rc
//! file and what it sources — lies in one of those: the rule follows where the host's
//! programs start from (`$PATH`, the startup files), not a list of tools. What stays
//! writable: the home's other entries (projects), a path named with `--writable-root` (at
//! or beneath a sealed entry), the guarded git directory of a home that is a repository
//! (`policy::protected` guards it already), and the copy-on-write toolchain caches, which
//! get their layers as anywhere. A project that a startup file names (an alias that `cd`s
//! into it) is sealed like any other named entry; naming it with `--writable-root` keeps it
//! writable.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// How many symbolic links are followed from one persistence path before giving up and
/// freezing the directory that holds the last one.
const MAX_LINKS: usize = 8;

/// How much of each startup file is read for the paths it names: rc files are small, and a
/// huge one must not slow every call down.
const STARTUP_READ_LIMIT: u64 = 256 * 1024;

/// How many files are read per home for the paths they name (startup files, the files in
/// startup directories, and the files those name): sandgate runs before every command.
const STARTUP_FILES_LIMIT: usize = 128;

/// How deep a startup directory (`~/.config/fish`, `~/.config/systemd`) is read.
const STARTUP_DIR_DEPTH: usize = 3;

/// Returns the caller's home directories, canonical and existing: `$HOME` (when absolute)
/// and the passwd entry's home of the effective uid, without duplicates.
pub fn caller_homes() -> Vec<PathBuf> {
    let from_env = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let from_passwd = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.dir);
    let mut homes: Vec<PathBuf> = Vec::new();
    for home in from_env.into_iter().chain(from_passwd) {
        let Ok(canonical) = std::fs::canonicalize(&home) else {
            continue;
        };
        if canonical.is_dir() && canonical != Path::new("/") && !homes.contains(&canonical) {
            homes.push(canonical);
        }
    }
    homes
}

/// Returns the first home that `workspace` (canonical) equals or contains.
pub fn held_by<'a>(workspace: &Path, homes: &'a [PathBuf]) -> Option<&'a PathBuf> {
    homes.iter().find(|home| home.starts_with(workspace))
}

/// The mounts that keep persistence paths unchanged, before they are narrowed to those
/// beneath a writable root.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Guarded {
    /// Existing persistence paths (canonical): bound read-only.
    pub read_only: BTreeSet<PathBuf>,
    /// Directories in which a persistence name is missing or a link: bound read-only, with
    /// their other entries writable again.
    pub frozen: BTreeSet<PathBuf>,
    /// Every directory on the way to a persistence path: bound onto itself.
    pub pinned: BTreeSet<PathBuf>,
}

/// The mounts that seal the homes a writable root holds (see the module docs).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// Existing dot-entries and directories on `$PATH`: bound read-only onto themselves
    /// among the writable binds, so what is mounted beneath them later (a writable root
    /// the user named, a cache's layer) keeps its own flags.
    pub read_only: BTreeSet<PathBuf>,
    /// Dot-entries that are links, and `$PATH` directories that are missing or reached
    /// through a link: guarded like persistence paths ([`guard`]).
    pub guarded: Vec<PathBuf>,
    /// The homes themselves: frozen.
    pub frozen: BTreeSet<PathBuf>,
}

/// What a home sealing needs to know about the call.
pub struct SealInputs<'a> {
    /// Canonical.
    pub homes: &'a [PathBuf],
    pub writable_roots: &'a BTreeSet<PathBuf>,
    /// Roots the user named with `--writable-root` (canonical): never sealed themselves.
    pub named: &'a BTreeSet<PathBuf>,
    /// `$PATH`, as written (absolute).
    pub path: &'a [PathBuf],
    /// Entries left as they are (a guarded git directory).
    pub exempt: &'a BTreeSet<PathBuf>,
    /// The persistence paths (absolute, expanded): those in a home are its startup files,
    /// read for the paths they name.
    pub startup: &'a [PathBuf],
}

/// Seals every home of `inputs.homes` that a writable root holds.
pub fn seal(inputs: &SealInputs<'_>) -> Sealed {
    let mut out = Sealed::default();
    for home in inputs.homes {
        if !inputs.writable_roots.iter().any(|r| home.starts_with(r)) {
            continue;
        }
        out.frozen.insert(home.clone());
        let Ok(entries) = std::fs::read_dir(home) else {
            continue;
        };
        let dot_entries = entries
            .flatten()
            .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"."))
            .map(|e| e.path());
        // The startup files: the persistence paths in this home, and every dot-file
        // directly in it — what a program the user runs reads at its start (`.vimrc`,
        // `.tmux.conf`, `.inputrc`), listed or not. Histories name every directory ever
        // visited, not what runs: left out.
        let dot_files = std::fs::read_dir(home)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name().as_encoded_bytes().to_ascii_lowercase();
                name.starts_with(b".")
                    && !name.windows(4).any(|w| w == b"hist")
                    && e.file_type().is_ok_and(|t| t.is_file())
            });
        let startup: Vec<PathBuf> = inputs
            .startup
            .iter()
            .filter(|p| p.starts_with(home))
            .cloned()
            .chain(dot_files.map(|e| e.path()))
            .collect();
        let kept = |entry: &PathBuf| inputs.named.contains(entry) || inputs.exempt.contains(entry);
        let mut entries: BTreeSet<PathBuf> = dot_entries.collect();
        // A `$PATH` directory in an entry the user named writable stays read-only itself,
        // as the directory the host runs from.
        let mut in_kept: Vec<&PathBuf> = Vec::new();
        for dir in inputs.path {
            let held = holding(home, dir);
            if held.iter().any(kept) {
                in_kept.push(dir);
            }
            entries.extend(held);
        }
        match named_by_startup_files(&startup, home) {
            Some(named) => {
                for path in named {
                    entries.extend(holding(home, &path));
                }
            }
            // Not all read within the bound: what the rest names is unknown, so every
            // entry of the home is sealed.
            None => {
                let all = std::fs::read_dir(home).into_iter().flatten().flatten();
                entries.extend(all.map(|e| e.path()));
            }
        }
        for entry in entries {
            if kept(&entry) {
                continue;
            }
            // A missing entry cannot be made: the home is frozen.
            let Ok(meta) = entry.symlink_metadata() else {
                continue;
            };
            if meta.file_type().is_symlink() {
                out.guarded.push(entry);
            } else if meta.is_dir() || meta.is_file() {
                out.read_only.insert(entry);
            }
        }
        for dir in in_kept {
            match std::fs::canonicalize(dir).ok().filter(|c| c.is_dir()) {
                Some(c) if c == *dir || !dir.starts_with(home) => {
                    let covered = out.read_only.iter().any(|s| c.starts_with(s));
                    if !covered && c != *home && !inputs.named.contains(&c) {
                        out.read_only.insert(c);
                    }
                }
                // Missing, or reached through a link inside the home: the link cannot be
                // changed and a missing directory cannot be made.
                _ => out.guarded.push(dir.clone()),
            }
        }
    }
    out
}

/// The entries directly in `home` that hold `path`: as written, and as resolved (a link
/// elsewhere may lead into the home, a link in the home out of it).
fn holding(home: &Path, path: &Path) -> Vec<PathBuf> {
    let resolved = std::fs::canonicalize(path).ok();
    let mut out: Vec<PathBuf> = top_entry(home, path).into_iter().collect();
    out.extend(resolved.and_then(|c| top_entry(home, &c)));
    out.dedup();
    out
}

/// The entry directly in `home` that holds `path` (absolute; `..` taken lexically), if
/// `path` lies beneath `home` — never `home` itself.
fn top_entry(home: &Path, path: &Path) -> Option<PathBuf> {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    let first = normal.strip_prefix(home).ok()?.components().next()?;
    match first {
        Component::Normal(name) => Some(home.join(name)),
        _ => None,
    }
}

/// The absolute paths that the startup files `files` of `home` name, and the files those
/// name in turn, as far as the bounds let it read ([`STARTUP_FILES_LIMIT`]). The files are
/// read before the directories' entries, and level by level, so that a full directory
/// (`~/bin`) does not use up the bound before what `.bashrc` sources is read. A file that is
/// not text (a program in `~/bin`, whose build paths would name a project) names nothing.
///
/// `None` when the bound stopped it before everything was read.
fn named_by_startup_files(files: &[PathBuf], home: &Path) -> Option<Vec<PathBuf>> {
    let (dirs, plain): (Vec<&PathBuf>, Vec<&PathBuf>) = files.iter().partition(|f| f.is_dir());
    let mut queue: std::collections::VecDeque<(PathBuf, usize)> = plain
        .into_iter()
        .chain(dirs)
        .map(|f| (f.clone(), 0))
        .collect();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut named = Vec::new();
    let mut read = 0;
    while let Some((file, depth)) = queue.pop_front() {
        if read >= STARTUP_FILES_LIMIT {
            return None;
        }
        if !seen.insert(file.clone()) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if meta.is_dir() {
            if depth < STARTUP_DIR_DEPTH {
                if let Ok(dir) = std::fs::read_dir(&file) {
                    queue.extend(dir.flatten().map(|e| (e.path(), depth + 1)));
                }
            }
            continue;
        }
        let Some(text) = read_bounded(&file) else {
            continue;
        };
        read += 1;
        if text.contains(&0) {
            continue;
        }
        for path in named_paths(&text, home) {
            if path.starts_with(home) {
                // Read next, before any directory's other entries; never walked as a
                // directory: only a named file is read.
                queue.push_front((path.clone(), STARTUP_DIR_DEPTH));
            }
            named.push(path);
        }
    }
    Some(named)
}

/// The first [`STARTUP_READ_LIMIT`] bytes of the regular file `path`, or `None`. Opened
/// without blocking, and checked on the opened file, so that a FIFO or a device put there
/// in the meantime is neither waited on nor read.
fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = Vec::new();
    file.take(STARTUP_READ_LIMIT).read_to_end(&mut text).ok()?;
    Some(text)
}

/// The absolute paths that `text` (a startup file of `home`) names: every word that, after
/// a leading `~/`, `$HOME` or `${HOME}` is expanded and quotes are stripped, is absolute.
///
/// Words are split twice — once honouring quotes (a quoted path with spaces), once at
/// quotes too (an apostrophe in a comment must not swallow the lines after it) — and each
/// is taken whole and cut at `:` and `=` (`PATH="$HOME/venv/bin:$PATH"`). A word too many
/// only seals more; a word missed would leave a file the host runs writable.
pub fn named_paths(text: &[u8], home: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for word in words(text, true).into_iter().chain(words(text, false)) {
        let pieces = word.split(|b| *b == b':' || *b == b'=');
        out.extend(
            std::iter::once(word.as_slice())
                .chain(pieces)
                .filter_map(|w| expand(w, home)),
        );
    }
    out
}

/// Splits `text` into shell words at whitespace and `;&|()<>` and backquotes, with their
/// quotes removed: `quoted` keeps what a pair of quotes on one line encloses in one word,
/// otherwise a quote separates words too.
fn words(text: &[u8], quoted: bool) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let mut word = Vec::new();
    let mut quote: Option<u8> = None;
    for &b in text {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) if b == b'\n' => {
                quote = None;
                words.push(std::mem::take(&mut word));
            }
            Some(_) => word.push(b),
            None if quoted && (b == b'"' || b == b'\'') => quote = Some(b),
            None if b.is_ascii_whitespace() || b";&|()<>`\"'".contains(&b) => {
                words.push(std::mem::take(&mut word));
            }
            None => word.push(b),
        }
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    words
}

/// `word` as an absolute path, with a leading `~`, `$HOME` or `${HOME}` made `home`.
fn expand(word: &[u8], home: &Path) -> Option<PathBuf> {
    // `%h` is systemd's name for the home in a unit file.
    let rest = [b"~".as_slice(), b"${HOME}", b"$HOME", b"%h"]
        .iter()
        .find_map(|prefix| word.strip_prefix(*prefix))
        .filter(|rest| rest.is_empty() || rest.starts_with(b"/"));
    match rest {
        Some(rest) => {
            let rest = rest.strip_prefix(b"/").unwrap_or(rest);
            Some(home.join(OsStr::from_bytes(rest)))
        }
        None if word.starts_with(b"/") => Some(PathBuf::from(OsStr::from_bytes(word))),
        None => None,
    }
}

/// Works out the mounts that guard `paths` (absolute, not necessarily canonical).
pub fn guard(paths: impl IntoIterator<Item = PathBuf>) -> Guarded {
    let mut out = Guarded::default();
    for path in paths {
        walk(&path, &mut out, 0);
    }
    out
}

/// Walks `path` from `/`, one component at a time, resolving links by hand so that each
/// link and each missing name is seen where it is.
fn walk(path: &Path, out: &mut Guarded, links: usize) {
    let mut dir = PathBuf::from("/");
    let mut rest = path.components().peekable();
    while let Some(component) = rest.next() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
            Component::ParentDir => {
                dir.pop();
                continue;
            }
            Component::Normal(name) => {
                let next = dir.join(name);
                match next.symlink_metadata() {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        out.frozen.insert(dir.clone());
                        let Ok(target) = std::fs::read_link(&next) else {
                            return;
                        };
                        if links < MAX_LINKS {
                            let mut resolved = dir.join(target);
                            resolved.extend(rest);
                            walk(&resolved, out, links + 1);
                        }
                        return;
                    }
                    Ok(meta) => {
                        if rest.peek().is_none() {
                            out.read_only.insert(next);
                            return;
                        }
                        if !meta.is_dir() {
                            // A file where a directory is expected: nothing can be created
                            // beneath it while it stays; its directory keeps it there.
                            out.frozen.insert(dir.clone());
                            return;
                        }
                        out.pinned.insert(next.clone());
                        dir = next;
                    }
                    Err(_) => {
                        out.frozen.insert(dir.clone());
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_missing_and_linked_paths() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let home = std::fs::canonicalize(root.path())?.join("home");
        std::fs::create_dir_all(home.join(".config"))?;
        std::fs::create_dir_all(home.join("dotfiles"))?;
        std::fs::write(home.join(".bashrc"), "")?;
        std::fs::write(home.join("dotfiles/profile"), "")?;
        std::os::unix::fs::symlink("dotfiles/profile", home.join(".profile"))?;
        let g = guard([
            home.join(".bashrc"),
            home.join(".zshrc"),
            home.join(".config/autostart"),
            home.join(".profile"),
            home.join(".local/bin"),
        ]);
        assert_eq!(
            g.read_only,
            BTreeSet::from([home.join(".bashrc"), home.join("dotfiles/profile")])
        );
        assert_eq!(
            g.frozen,
            BTreeSet::from([home.clone(), home.join(".config")])
        );
        assert!(g.pinned.contains(&home));
        assert!(g.pinned.contains(&home.join(".config")));
        assert!(g.pinned.contains(&home.join("dotfiles")));
        Ok(())
    }

    #[test]
    fn a_workspace_holding_a_home_is_found() {
        let homes = [PathBuf::from("/home/u")];
        assert!(held_by(Path::new("/home/u"), &homes).is_some());
        assert!(held_by(Path::new("/home"), &homes).is_some());
        assert!(held_by(Path::new("/home/u/src"), &homes).is_none());
        assert!(held_by(Path::new("/home/uu"), &homes).is_none());
    }

    #[test]
    fn a_writable_home_is_sealed_by_rule() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let base = std::fs::canonicalize(root.path())?;
        let home = base.join("home");
        for dir in [".local/lib", ".git", "proj", "tools/bin", "dotfiles"] {
            std::fs::create_dir_all(home.join(dir))?;
        }
        std::fs::write(home.join(".profile"), "")?;
        std::fs::write(home.join("dotfiles/vimrc"), "")?;
        std::os::unix::fs::symlink("dotfiles/vimrc", home.join(".vimrc"))?;
        let homes = [home.clone()];
        let named = BTreeSet::from([home.join(".local/lib")]);
        let exempt = BTreeSet::from([home.join(".git")]);
        let path = [
            home.join("tools/bin"),
            home.join("go/bin"),
            home.join(".local/bin"),
            PathBuf::from("/usr/bin"),
        ];
        let inputs = |roots| SealInputs {
            homes: &homes,
            writable_roots: roots,
            named: &named,
            path: &path,
            exempt: &exempt,
            startup: &[],
        };
        let elsewhere = BTreeSet::from([base.join("ws")]);
        assert_eq!(seal(&inputs(&elsewhere)), Sealed::default());
        let sealed = seal(&inputs(&BTreeSet::from([base.clone()])));
        assert_eq!(
            sealed.read_only,
            BTreeSet::from([
                home.join(".local"),
                home.join(".profile"),
                home.join("tools")
            ])
        );
        // `~/go` is missing: the frozen home keeps it from being made.
        assert_eq!(sealed.guarded, [home.join(".vimrc")]);
        assert_eq!(sealed.frozen, BTreeSet::from([home.clone()]));
        // The guard then keeps the link's target read-only and its directory frozen.
        let guarded = guard(sealed.guarded);
        assert!(guarded.read_only.contains(&home.join("dotfiles/vimrc")));
        assert!(guarded.frozen.contains(&home));
        Ok(())
    }

    #[test]
    fn startup_files_name_paths_however_they_write_them() {
        let home = Path::new("/h/u");
        let named = |text: &str| named_paths(text.as_bytes(), home);
        let has = |text: &str, path: &str| {
            let found = named(text);
            assert!(
                found.contains(&PathBuf::from(path)),
                "{text:?} should name {path}, found {found:?}"
            );
        };
        has(
            ". \"$HOME/miniconda3/etc/profile.d/conda.sh\"\n",
            "/h/u/miniconda3/etc/profile.d/conda.sh",
        );
        has(
            "if [ -f /h/u/tools/env.sh ]; then . /h/u/tools/env.sh; fi",
            "/h/u/tools/env.sh",
        );
        has(
            "source ~/google-cloud-sdk/path.bash.inc",
            "/h/u/google-cloud-sdk/path.bash.inc",
        );
        has(
            "source \"${HOME}/My Tools/init.sh\"",
            "/h/u/My Tools/init.sh",
        );
        has("export PATH=\"$HOME/venv/bin:$PATH\"", "/h/u/venv/bin");
        has("alias ll='ls -l' # don't\n. ~/rc/extra", "/h/u/rc/extra");
        has("[ -x ~/x ] && ~/x", "/h/u/x");
        // Not a path in this home, or not a path at all.
        assert!(named("$HOMEBREW/bin ~other/x relative/x echo hi").is_empty());
        assert_eq!(named("cd ~"), BTreeSet::from([PathBuf::from("/h/u")]));
    }

    #[test]
    fn a_path_is_held_by_its_first_entry_under_the_home() {
        let home = Path::new("/h/u");
        let entry = |p: &str| top_entry(home, Path::new(p));
        assert_eq!(entry("/h/u/venv/bin"), Some(PathBuf::from("/h/u/venv")));
        assert_eq!(entry("/h/u/bin"), Some(PathBuf::from("/h/u/bin")));
        assert_eq!(entry("/h/u/a/../b/c"), Some(PathBuf::from("/h/u/b")));
        assert_eq!(entry("/h/u"), None);
        assert_eq!(entry("/h/u/"), None);
        assert_eq!(entry("/h/u/.."), None);
        assert_eq!(entry("/h/uu/x"), None);
        assert_eq!(entry("/usr/bin"), None);
    }

    #[test]
    fn what_path_and_startup_files_reach_is_sealed_whole() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let home = std::fs::canonicalize(root.path())?.join("home");
        for dir in [
            "venv/bin",
            "venv/lib/site-packages",
            "bin",
            "miniconda3/etc/profile.d",
            "google-cloud-sdk",
            "dotfiles",
            "nested",
            "proj",
            "work/bin",
            ".config/fish/conf.d",
        ] {
            std::fs::create_dir_all(home.join(dir))?;
        }
        std::fs::write(
            home.join(".bashrc"),
            ". \"$HOME/miniconda3/etc/profile.d/conda.sh\"\n\
             source ~/google-cloud-sdk/path.bash.inc\n\
             . ~/dotfiles/aliases\n",
        )?;
        std::fs::write(home.join("dotfiles/aliases"), "alias n='. ~/nested/x'\n")?;
        std::fs::write(home.join("miniconda3/etc/profile.d/conda.sh"), "")?;
        std::fs::write(
            home.join(".config/fish/conf.d/w.fish"),
            "source ~/work/x.fish\n",
        )?;
        // A program is not a startup file: the paths built into it name nothing.
        std::fs::write(home.join("bin/tool"), b"\0/home/proj/src/main.rs")?;
        let homes = [home.clone()];
        let named = BTreeSet::from([home.join("work")]);
        let roots = BTreeSet::from([home.clone()]);
        let startup = [
            home.join(".bashrc"),
            home.join(".zshrc"),
            home.join(".config/fish"),
        ];
        let path = [
            home.join("venv/bin"),
            home.join("bin"),
            home.join("work/bin"),
            home.clone(),
        ];
        let sealed = seal(&SealInputs {
            homes: &homes,
            writable_roots: &roots,
            named: &named,
            path: &path,
            exempt: &BTreeSet::new(),
            startup: &startup,
        });
        assert_eq!(
            sealed.read_only,
            BTreeSet::from([
                home.join(".bashrc"),
                home.join(".config"),
                home.join("bin"),
                home.join("dotfiles"),
                home.join("google-cloud-sdk"),
                home.join("miniconda3"),
                home.join("nested"),
                home.join("venv"),
                // In an entry named writable, the `$PATH` directory alone stays sealed.
                home.join("work/bin"),
            ])
        );
        // The home itself is frozen, never read-only; a project and a named root stay.
        assert_eq!(sealed.frozen, BTreeSet::from([home.clone()]));
        Ok(())
    }
}
