//! Attacks on the copy-on-write toolchain caches from inside `workspace-write`: nothing a
//! call leaves behind (files, symlinks, processes still running) may make sandgate change
//! the host's caches later — here through `sandgate tmp --clean`, which removes the
//! workspace's private temp and cache layers while a process left by an earlier call keeps
//! swapping directories in them for symlinks to the host's Go module cache.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{assert_status, output, TestEnv};

/// The first directory beneath `dir` whose path ends in `tail`.
fn named_dir_beneath(dir: &Path, tail: &str) -> Option<PathBuf> {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        if d.ends_with(tail) {
            return Some(d);
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(entry.path());
            }
        }
    }
    None
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The mode of every directory beneath (and of) `dir`, never following a symlink.
fn dir_modes(dir: &Path) -> BTreeMap<PathBuf, u32> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let meta = d
            .symlink_metadata()
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        out.insert(d.clone(), meta.permissions().mode() & 0o7777);
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(entry.path());
            }
        }
    }
    out
}

#[test]
fn tmp_clean_never_follows_a_symlink_swapped_in_by_a_process_left_behind() {
    let env = TestEnv::new();
    let home = env.root.join("home");
    // Go keeps its module cache read-only (directories 0555); npm's cache is a layer too.
    let modcache = home.join("go/pkg/mod");
    let module = modcache.join("example.com/m@v1.0.0");
    std::fs::create_dir_all(module.join("sub")).unwrap();
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    std::fs::write(module.join("go.mod"), "module example.com/m\n").unwrap();
    for dir in [
        module.join("sub"),
        module.clone(),
        modcache.join("example.com"),
    ] {
        set_mode(&dir, 0o555);
    }
    let before = dir_modes(&modcache);

    // Processes left behind swap directories for symlinks to the host's module cache, in
    // the workspace's private /tmp and in its npm cache layer, racing `tmp --clean`. Only a
    // PID namespace lets sandgate find and stop them first; a call without one cannot keep
    // anything (refused), but its processes outlive a sandgate that is killed. They are
    // started here, on the host paths an earlier call made, for what such a leftover does.
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.arg("--workspace")
        .arg(&env.ws)
        .env("HOME", &home)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "mkdir -p /tmp/race \"$HOME/.npm/race\"",
        ]);
    assert_status(&output(&mut cmd), 0);
    let temp = support::private_tmp_of(&env);
    let layers = PathBuf::from(format!("{}.caches", temp.display()));
    let npm_race = named_dir_beneath(&layers, ".npm/race")
        .unwrap_or_else(|| panic!("no .npm/race in {}", layers.display()));
    let probe = support::probe();
    let mut racers: Vec<std::process::Child> = [temp.join("race"), npm_race]
        .iter()
        .map(|dir| {
            Command::new(&probe)
                .arg("exchange-many")
                .arg(dir)
                .arg("200")
                .arg(&modcache)
                .arg("20000")
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));

    // The user clears the workspace's private temp and layers (retrying as told to).
    let mut changed = None;
    for _ in 0..8 {
        let mut clean = Command::new(support::sandgate());
        env.isolate(&mut clean);
        let out = output(clean.args(["tmp", "--clean", "--workspace"]).arg(&env.ws));
        let after = dir_modes(&modcache);
        if after != before {
            changed = Some(after);
            break;
        }
        if out.status.success() {
            break;
        }
    }
    for racer in &mut racers {
        let _ = racer.kill();
        let _ = racer.wait();
    }
    assert_eq!(
        changed, None,
        "`sandgate tmp --clean` changed the host's Go module cache (was {before:?})"
    );
}
