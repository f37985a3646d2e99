//! Markers in directories the supervisor has already seen allow writes. It remembers that
//! verdict and answers later calls there at a glance; what it must still look at: a path
//! that leaves the directory through a symlink or `..`, a symlink in the last place, a
//! protected path inside the writable directory, a directory that is a mount of its own,
//! and a frozen directory.

use std::path::Path;

use crate::support::*;

/// Lays out the workspace: a protected `keep.txt` (by the project's configuration),
/// symlinks to the outside at two depths, and a symlink to a file outside in `deep/`,
/// which holds nothing protected.
fn plant(env: &TestEnv) {
    let ws = &env.ws;
    let write = |p: &Path, text: &str| std::fs::write(p, text).unwrap();
    let link = |target: &Path, at: &Path| std::os::unix::fs::symlink(target, at).unwrap();
    std::fs::create_dir_all(ws.join(".sandgate")).unwrap();
    std::fs::create_dir_all(ws.join("deep/sub")).unwrap();
    write(
        &ws.join(".sandgate/config.json"),
        r#"{"protected_paths": ["keep.txt"]}"#,
    );
    write(&ws.join("keep.txt"), "keep\n");
    write(&env.outside.join("victim"), "victim\n");
    link(&env.outside, &ws.join("esc"));
    link(&env.outside, &ws.join("deep/esc"));
    link(&env.outside.join("victim"), &ws.join("deep/link-out"));
}

/// Allowed writes first, in every directory the refused ones then start from, so that
/// each refused one comes after its directory's verdict is known.
fn script(ws: &Path) -> String {
    let ws = ws.display();
    format!(
        "echo ok > warm && echo ok > deep/warm && echo ok > deep/sub/warm && echo ok > '{ws}/warm-abs'
         echo x > esc/new1
         echo x > deep/esc/new2
         echo x > deep/link-out
         echo x > ../outside/new3
         echo x >> keep.txt
         (cd deep/sub && echo ok > warm2 && echo x > ../../esc/new4)
         echo x > '{ws}/deep/esc/new5'
         echo x > '{ws}/esc/new6'
         echo ok > warm3
         true"
    )
}

#[test]
fn a_directory_seen_writable_still_reports_every_way_out_of_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    plant(&env);
    let (out, markers) = env.run_logged("workspace-write", &["/bin/sh", "-c", &script(&env.ws)]);
    assert_status(&out, 0);
    let ws = env.ws.display();
    let expected = [
        ("create", format!("{ws}/esc/new1"), "full-access"),
        ("create", format!("{ws}/deep/esc/new2"), "full-access"),
        ("write", format!("{ws}/deep/link-out"), "full-access"),
        ("create", format!("{ws}/../outside/new3"), "full-access"),
        ("write", format!("{ws}/keep.txt"), "full-access"),
        (
            "create",
            format!("{ws}/deep/sub/../../esc/new4"),
            "full-access",
        ),
        ("create", format!("{ws}/deep/esc/new5"), "full-access"),
        ("create", format!("{ws}/esc/new6"), "full-access"),
    ];
    let got: Vec<(String, String, String)> = markers
        .iter()
        .map(|m| {
            let field = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (field("op"), field("path"), field("needed"))
        })
        .collect();
    let want: Vec<(String, String, String)> = expected
        .iter()
        .map(|(op, path, needed)| ((*op).to_owned(), path.clone(), (*needed).to_owned()))
        .collect();
    assert_eq!(got, want, "{}", show(&out));
    for name in ["new1", "new2", "new3", "new4", "new5", "new6"] {
        assert!(!env.outside.join(name).exists(), "{name} was written");
    }
    assert_eq!(
        std::fs::read_to_string(env.outside.join("victim")).unwrap_or_default(),
        "victim\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("keep.txt")).unwrap_or_default(),
        "keep\n"
    );
    for warm in [
        "warm",
        "deep/warm",
        "deep/sub/warm",
        "deep/sub/warm2",
        "warm3",
    ] {
        assert!(env.ws.join(warm).exists(), "{warm} was not written");
    }

    // Control: with full access every one of those writes happens, and none is reported.
    let (out, markers) = env.run_logged("full-access", &["/bin/sh", "-c", &script(&env.ws)]);
    assert_status(&out, 0);
    assert!(markers.is_empty(), "{markers:#?}");
    for name in ["new1", "new2", "new3", "new4", "new5", "new6"] {
        assert!(env.outside.join(name).exists(), "{name} was not written");
    }
    assert_eq!(
        std::fs::read_to_string(env.ws.join("keep.txt")).unwrap_or_default(),
        "keep\nx\n"
    );
}

/// A directory's number is handed to the next directory made on that filesystem once it is
/// removed (ext4 usually does so at once). What is remembered of the old directory must
/// not answer for the new one: neither a writable directory's verdict for one the
/// supervisor made in the guarded `.git` (read-only to the sandbox: the supervisor writes
/// there through its own handle, and through the sandbox's view the write would fail),
/// nor the other way round.
///
/// Whether a number is reused is the filesystem's choice (ext4 holds a number back for a
/// few seconds under journal pressure; tmpfs and btrfs never reuse one), so the script
/// tries for it and the outcome is asserted either way: it is the same. The cache's own
/// unit tests pin the reuse case without depending on the filesystem.
#[test]
fn a_verdict_is_not_inherited_by_a_directory_that_reuses_an_inode_number() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    init_repository(&env.ws);
    // Tests running beside this one make directories too: each step is tried until the
    // number is reused, and only then is the write made.
    let script = r#"i=0
         while [ $i -lt 50 ]; do
           i=$((i+1))
           mkdir d && echo ok > d/warm && n1=$(stat -c %i d) && rm -r d
           mkdir .git/rebase-merge && n2=$(stat -c %i .git/rebase-merge)
           [ "$n1" = "$n2" ] && break
           rmdir .git/rebase-merge
         done
         [ -d .git/rebase-merge ] || mkdir .git/rebase-merge
         (cd .git/rebase-merge && echo x > written && cat written > ../../copied && rm written)
         rmdir .git/rebase-merge
         i=0
         while [ $i -lt 50 ]; do
           i=$((i+1))
           mkdir e && n3=$(stat -c %i e)
           [ "$n3" = "$n2" ] && break
           rmdir e
         done
         [ -d e ] || mkdir e
         echo ok > e/allowed
         echo "$n1 $n2 $n3" > numbers
         true"#;
    let (out, markers) = env.run_logged("workspace-write", &["/bin/sh", "-c", script]);
    assert_status(&out, 0);
    let numbers = std::fs::read_to_string(env.ws.join("numbers")).unwrap_or_default();
    let numbers: Vec<&str> = numbers.split_whitespace().collect();
    let reused = numbers.len() == 3 && numbers.iter().all(|n| *n == numbers[0]);
    eprintln!("inode numbers {numbers:?}: reused = {reused}");
    let ws = env.ws.display();
    let got: Vec<(String, String)> = markers
        .iter()
        .map(|m| {
            let field = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (field("op"), field("path"))
        })
        .collect();
    assert_eq!(got, Vec::<(String, String)>::new(), "{ws}: {}", show(&out));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("copied")).unwrap_or_default(),
        "x\n",
        "the write in .git/rebase-merge: {}",
        show(&out)
    );
    assert!(!env.ws.join(".git/rebase-merge").exists());
    assert!(env.ws.join("e/allowed").exists());
}

/// The markers of one successful `/bin/sh -c` script run by `cmd`, each as "op path", the
/// path relative to the workspace.
fn marked(env: &TestEnv, cmd: &mut std::process::Command, script: &str) -> Vec<String> {
    let log = env.root.join("denials.ndjson");
    let _ = std::fs::remove_file(&log);
    cmd.arg("--denial-log")
        .arg(&log)
        .args(["--", "/bin/sh", "-c", script]);
    let out = output(cmd);
    assert_status(&out, 0);
    let ws = format!("{}/", env.ws.display());
    read_markers(&log)
        .into_iter()
        .filter(|m| m["kind"] == "sandbox_denial")
        .map(|m| {
            let field = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            format!("{} {}", field("op"), field("path").replacen(&ws, "", 1))
        })
        .collect()
}

/// A call on a directory itself is judged by that directory, which may be a mount of its
/// own: the guarded `.git` is read-only although the workspace around it is writable, and
/// its `objects/` and `refs/` are writable although `.git` is not. Each line reports its
/// own outcome, so the script records what the kernel did beside what was marked.
#[test]
fn a_call_on_a_mount_point_is_judged_by_that_mount() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    init_repository(&env.ws);
    let script = "echo ok > warm
        chmod 755 .git 2>/dev/null && echo chmod-git >> did
        touch .git 2>/dev/null && echo touch-git >> did
        chmod 755 .git/objects && echo chmod-objects >> did
        touch .git/refs && echo touch-refs >> did
        true";
    let markers = marked(&env, &mut env.sandgate("workspace-write"), script);
    let did = std::fs::read_to_string(env.ws.join("did")).unwrap_or_default();
    assert_eq!(did, "chmod-objects\ntouch-refs\n");
    assert_eq!(
        markers,
        ["git_metadata .git", "git_metadata .git"],
        "the refused calls on .git, and nothing for objects/ and refs/"
    );
}

/// With the workspace as home, the startup files a login would run stay out of reach: the
/// workspace's own directory is frozen (nothing can be made, removed or renamed directly
/// in it) while its existing entries stay writable. Every refused name is reported.
#[test]
fn a_frozen_directory_reports_what_cannot_be_made_in_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir_all(env.ws.join("sub")).unwrap();
    std::fs::write(env.ws.join("existing"), "a\n").unwrap();
    let script = "echo b >> existing && echo write-existing >> sub/did
        echo c > sub/inside && echo create-inside >> sub/did
        mkdir made 2>/dev/null && echo mkdir >> sub/did
        echo d > newfile 2>/dev/null && echo create >> sub/did
        echo e > .zshrc 2>/dev/null && echo zshrc >> sub/did
        true";
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("HOME", &env.ws);
    let markers = marked(&env, &mut cmd, script);
    let did = std::fs::read_to_string(env.ws.join("sub/did")).unwrap_or_default();
    assert_eq!(did, "write-existing\ncreate-inside\n");
    assert_eq!(markers, ["create made", "create newfile", "create .zshrc"]);
}
