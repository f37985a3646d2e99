use super::*;
use std::os::unix::fs::PermissionsExt;

/// A home outside /tmp (whose cache directory the tests share) with `files` at their modes.
fn home(files: &[(&str, u32)]) -> std::io::Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir_in("/var/tmp")?;
    let home = std::fs::canonicalize(dir.path())?;
    for (file, mode) in files {
        write(&home.join(file), *mode)?;
    }
    Ok((dir, home))
}

fn write(path: &Path, mode: u32) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, "x")?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

fn root(home: &Path, skip: &[&str]) -> Root {
    Root {
        path: home.to_path_buf(),
        scope: Scope::Home,
        skip: skip.iter().map(|s| home.join(s)).collect(),
        xdg: vec![],
    }
}

/// Every secret of the snapshot, relative to its root.
fn secrets(snapshot: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    snapshot.tree.visit(Path::new(""), &mut |node, path| {
        out.extend(
            node.secret
                .iter()
                .map(|name| path.join(name).display().to_string()),
        );
    });
    out.sort();
    out
}

fn me() -> Caller {
    Caller::current()
}

#[test]
fn owner_only_files_in_dot_entries_and_the_home_are_found_and_nothing_else() -> std::io::Result<()>
{
    let (_dir, home) = home(&[
        (".pgpass", 0o600),
        (".bashrc", 0o644),
        (".x_history", 0o400),
        (".local/bin/private-tool", 0o700),
        (".foo/token", 0o600),
        (".foo/readme", 0o644),
        (".foo/group-readable", 0o640),
        (".config/app/credentials.json", 0o600),
        (".config/a/b/c/d/deep", 0o600),
        (".config/a/b/c/shallow", 0o600),
        (".cache/skipped/token", 0o600),
        ("notdot/token", 0o600),
        ("top-level", 0o600),
    ])?;
    std::os::unix::fs::symlink(home.join(".foo"), home.join(".link"))?;
    let snapshot = walk(&root(&home, &[".cache/skipped"]), &me(), &[])
        .ok_or_else(|| std::io::Error::other("no snapshot"))?;
    assert_eq!(
        secrets(&snapshot),
        [
            ".config/a/b/c/shallow",
            ".config/app/credentials.json",
            ".foo/token",
            ".pgpass",
            ".x_history",
            "top-level"
        ]
    );
    assert!(!snapshot.truncated);
    Ok(())
}

#[test]
fn a_cache_round_trips_and_anything_else_is_refused() -> std::io::Result<()> {
    let (_dir, home) = home(&[(".foo/token", 0o600), (".foo/readme", 0o644)])?;
    let root = root(&home, &[]);
    let snapshot = walk(&root, &me(), &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    let bytes = store::encode(&snapshot);
    let mut decoded =
        store::decode(&bytes, &root).ok_or_else(|| std::io::Error::other("no decode"))?;
    decoded.source = Source::Walked;
    assert_eq!(decoded, snapshot);
    for cut in [0, 10, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            store::decode(&bytes[..cut], &root).is_none(),
            "cut at {cut}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(store::decode(&longer, &root).is_none());
    // A name that would lead out of its directory.
    let planted = String::from_utf8_lossy(&bytes).replace("token", "../..");
    assert!(store::decode(planted.as_bytes(), &root).is_none());
    Ok(())
}

#[test]
fn the_cache_sees_new_removed_and_chmodded_files_at_the_next_call() -> std::io::Result<()> {
    let (_dir, home) = home(&[(".foo/readme", 0o644), (".config/app/settings", 0o644)])?;
    let root = root(&home, &[]);
    let caller = me();
    let first =
        snapshot(&root, &caller, &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    assert!(secrets(&first).is_empty());
    // Times within the racy window are recorded as changed: the next call reads again.
    let again =
        snapshot(&root, &caller, &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    assert_eq!(again.source, Source::Refreshed);
    // A new owner-only file, a file made owner-only, a new directory with one.
    write(&home.join(".foo/new-token"), 0o600)?;
    std::fs::set_permissions(
        home.join(".config/app/settings"),
        std::fs::Permissions::from_mode(0o600),
    )?;
    write(&home.join(".config/other/deep/key"), 0o600)?;
    let next = snapshot(&root, &caller, &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    assert_eq!(next.source, Source::Refreshed);
    assert_eq!(
        secrets(&next),
        [
            ".config/app/settings",
            ".config/other/deep/key",
            ".foo/new-token"
        ]
    );
    // Removed again, and a directory gone.
    std::fs::remove_file(home.join(".foo/new-token"))?;
    std::fs::remove_dir_all(home.join(".config/other"))?;
    let last = snapshot(&root, &caller, &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    assert_eq!(secrets(&last), [".config/app/settings"]);
    // The refreshed snapshot is what a full walk finds.
    let walked = walk(&root, &caller, &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    assert_eq!(secrets(&walked), secrets(&last));
    Ok(())
}

#[test]
fn settled_times_let_an_unchanged_tree_come_from_the_cache() -> std::io::Result<()> {
    let (_dir, home) = home(&[(".foo/token", 0o600)])?;
    let root = root(&home, &[]);
    let caller = me();
    let mut snapshot =
        walk(&root, &caller, &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    // As if the scan had run long after the tree last changed.
    set_times(&mut snapshot.tree, &home);
    store::save(&snapshot, &caller);
    let cached =
        super::snapshot(&root, &caller, &[]).ok_or_else(|| std::io::Error::other("none"))?;
    assert_eq!(cached.source, Source::Cached);
    assert_eq!(secrets(&cached), [".foo/token"]);
    Ok(())
}

/// Records each directory's real times, as a scan long after the last change would.
fn set_times(node: &mut Node, path: &Path) {
    if let Ok(st) = nix::sys::stat::lstat(path) {
        node.mtime = nanos(st.st_mtime, st.st_mtime_nsec);
        node.ctime = nanos(st.st_ctime, st.st_ctime_nsec);
    }
    node.watched.clear();
    for child in &mut node.children {
        let child_path = path.join(&child.name);
        set_times(child, &child_path);
    }
}

#[test]
fn system_files_others_may_not_read_and_closed_directories() -> std::io::Result<()> {
    let dir = tempfile::tempdir_in("/var/tmp")?;
    let etc = std::fs::canonicalize(dir.path())?;
    write(&etc.join("shadow"), 0o640)?;
    write(&etc.join("passwd"), 0o644)?;
    write(&etc.join("unreadable"), 0o000)?;
    write(&etc.join("ssl/private/key.pem"), 0o600)?;
    std::fs::set_permissions(
        etc.join("ssl/private"),
        std::fs::Permissions::from_mode(0o700),
    )?;
    let root = Root {
        path: etc.clone(),
        scope: Scope::System,
        skip: vec![],
        xdg: vec![],
    };
    let snapshot = walk(&root, &me(), &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    assert_eq!(secrets(&snapshot), ["shadow"]);
    let private = &snapshot.tree.children[0].children[0];
    assert!(private.closed && private.children.is_empty() && private.files == 0);
    Ok(())
}

#[test]
fn a_home_directory_only_its_owner_may_enter_is_closed_but_still_read() -> std::io::Result<()> {
    let (_dir, home) = home(&[
        (".myapp/token", 0o644),
        (".myapp/key", 0o600),
        (".config/tool/auth/session", 0o644),
        (".config/git/config", 0o644),
        (".local/share/app/data", 0o644),
        (".open/readme", 0o644),
    ])?;
    for (dir, mode) in [
        (".myapp", 0o700),
        (".config/tool/auth", 0o700),
        (".config", 0o700),
        (".local/share", 0o700),
        (".local", 0o700),
        (".open", 0o755),
        ("", 0o700),
    ] {
        std::fs::set_permissions(home.join(dir), std::fs::Permissions::from_mode(mode))?;
    }
    let snapshot =
        walk(&root(&home, &[]), &me(), &[]).ok_or_else(|| std::io::Error::other("none"))?;
    let mut closed = vec![];
    snapshot.tree.visit(Path::new(""), &mut |node, path| {
        if node.closed {
            closed.push(path.display().to_string());
        }
    });
    closed.sort();
    assert_eq!(closed, [".config/tool/auth", ".myapp"]);
    // Read all the same: its owner-only files are known, for when it stays visible.
    assert_eq!(secrets(&snapshot), [".myapp/key"]);
    Ok(())
}

#[test]
fn a_closed_directory_at_the_last_level_is_named_by_its_parent() -> std::io::Result<()> {
    let (_dir, home) = home(&[(".a/b/c/d/e/token", 0o644), (".a/b/c/d/open/f", 0o644)])?;
    std::fs::set_permissions(
        home.join(".a/b/c/d/e"),
        std::fs::Permissions::from_mode(0o700),
    )?;
    let snapshot =
        walk(&root(&home, &[]), &me(), &[]).ok_or_else(|| std::io::Error::other("none"))?;
    let mut below = vec![];
    snapshot.tree.visit(Path::new(""), &mut |node, path| {
        below.extend(
            node.closed_below
                .iter()
                .map(|n| path.join(n).display().to_string()),
        );
    });
    assert_eq!(below, [".a/b/c/d/e"]);
    Ok(())
}

#[test]
fn at_most_so_many_files_are_watched_however_many_share_a_time() -> std::io::Result<()> {
    let (_dir, home) = home(&[])?;
    for i in 0..(MAX_WATCHED + 50) {
        write(&home.join(format!(".many/f{i}")), 0o644)?;
    }
    let mut snapshot =
        walk(&root(&home, &[]), &me(), &[]).ok_or_else(|| std::io::Error::other("no snapshot"))?;
    // As if they had all been written within one tick of the clock.
    for w in &mut snapshot.tree.children[0].watched {
        w.ctime = 42;
    }
    limit_watched(&mut snapshot.tree);
    assert_eq!(snapshot.tree.children[0].watched.len(), MAX_WATCHED);
    Ok(())
}

#[test]
fn a_directory_read_before_is_read_again_when_it_changed_whatever_the_bounds_spent(
) -> std::io::Result<()> {
    let (_dir, home) = home(&[(".config/git/config", 0o644)])?;
    // A workspace in a dot-entry, flooded past the bounds.
    for i in 0..(MAX_DIRS + 100) {
        std::fs::create_dir_all(home.join(format!(".dotfiles/d{i}")))?;
    }
    let root = root(&home, &[]);
    let ws = home.join(".dotfiles");
    let mut snapshot = walk(&root, &me(), &[&ws]).ok_or_else(|| std::io::Error::other("none"))?;
    assert!(snapshot.truncated);
    // `.config/git` was read, but too soon after a change to trust its times.
    let git = &mut snapshot.tree.children[0].children[0];
    assert_eq!(git.name, "git");
    assert!(!git.unread);
    git.mtime = 0;
    let caller = me();
    let mut scan = Scan::new(&root, &caller, snapshot.tree.count());
    assert_eq!(scan.refresh(&mut snapshot.tree, &home, 0), Kept::Same);
    let git = &snapshot.tree.children[0].children[0];
    assert!(
        !git.unread,
        "a directory known before is taken as unread once the bounds are spent"
    );
    Ok(())
}
