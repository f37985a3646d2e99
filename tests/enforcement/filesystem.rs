//! Filesystem confinement.

use crate::support::*;

#[test]
fn read_only_reads_anywhere_and_writes_nowhere() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::write(env.outside.join("data"), "secret").unwrap();
    let out = env.run(
        "read-only",
        &["cat", &env.outside.join("data").to_string_lossy()],
    );
    assert_status(&out, 0);
    assert_eq!(out.stdout, b"secret");
    for target in [env.ws.join("f"), env.outside.join("f"), env.ws.join("sub")] {
        let t = target.to_string_lossy();
        let out = env.sh("read-only", &format!("echo x > '{t}' || mkdir '{t}'"));
        assert_command_failed(&out);
        assert!(!target.exists(), "{t} was created under read-only");
    }
    // Relative to the cwd (the workspace), too.
    assert_command_failed(&env.sh("read-only", "touch ./rel"));
    assert!(!env.ws.join("rel").exists());
}

#[test]
fn read_only_allows_dev_null_and_a_private_tmp_that_vanishes() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    assert_status(
        &env.sh(
            "read-only",
            "echo x > /dev/null && echo y >/dev/zero; cat /dev/null",
        ),
        0,
    );
    // `$TMPDIR` is the landlock backend's private temp: the workspace's, on the host.
    let out = env.sh("read-only", "f=$(mktemp \"${TMPDIR:-/tmp}/sandgate-ro.XXXXXX\") && echo data > \"$f\" && cat \"$f\" >/dev/null && echo \"$f\"");
    assert_status(&out, 0);
    let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    match landlock_backend() {
        true => assert!(
            std::path::Path::new(&name).starts_with(private_tmp_of(&env)),
            "{}",
            show(&out)
        ),
        false => {
            assert!(name.starts_with("/tmp/sandgate-ro."), "{}", show(&out));
            assert!(
                !std::path::Path::new(&name).exists(),
                "{name} leaked onto the host /tmp"
            );
        }
    }
    // Nothing of the host's /tmp can be read (with namespaces, nothing of it is there).
    let marker = tempfile::Builder::new()
        .prefix("host-only")
        .tempfile_in("/tmp")
        .unwrap();
    std::fs::write(marker.path(), "host\n").unwrap();
    let out = env.sh("read-only", &format!("cat '{}'", marker.path().display()));
    assert_status(&out, 1);
    assert!(out.stdout.is_empty(), "{}", show(&out));
}

#[test]
fn workspace_write_writes_in_the_workspace_and_its_private_tmp() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // A host file of the same name in the host's /tmp: the sandbox's /tmp is another one.
    let host_file = tempfile::Builder::new()
        .prefix("sandgate-ww")
        .tempfile_in("/tmp")
        .unwrap();
    std::fs::write(host_file.path(), "host\n").unwrap();
    let tmp = host_file.path().to_string_lossy().into_owned();
    // The landlock backend's private temp is `$TMPDIR`, and the host's /tmp stays as it is.
    let name = host_file.path().file_name().unwrap_or_default();
    let (inside, host) = match landlock_backend() {
        true => (
            format!("\"$TMPDIR\"/{}", name.to_string_lossy()),
            format!("; (echo x > '{tmp}') 2>/dev/null; true"),
        ),
        false => (format!("'{tmp}'"), String::new()),
    };
    let out = env.sh(
        "workspace-write",
        &format!("mkdir d && echo a > d/f && mv d/f g && echo t > {inside}{host}"),
    );
    assert_status(&out, 0);
    assert_eq!(
        std::fs::read_to_string(env.ws.join("g")).unwrap_or_default(),
        "a\n"
    );
    assert_eq!(std::fs::read_to_string(&tmp).unwrap_or_default(), "host\n");
    let private = private_tmp_of(&env);
    assert_eq!(
        std::fs::read_to_string(private.join(name)).unwrap_or_default(),
        "t\n"
    );
}

/// Every way out of the workspace an attacker would try; each must leave the outside
/// directory exactly as it was.
#[test]
fn workspace_write_cannot_write_outside_by_any_path() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let out_dir = env.outside.to_string_lossy().into_owned();
    let victim = env.outside.join("victim");
    std::fs::write(&victim, "original").unwrap();
    std::os::unix::fs::symlink(&env.outside, env.ws.join("escape")).unwrap();
    std::fs::write(env.ws.join("mine"), "mine").unwrap();
    let attempts = [
        format!("echo x > '{out_dir}/new'"),
        "echo x > escape/new".to_owned(),
        "echo x >> escape/victim".to_owned(),
        "echo x > ../outside/new".to_owned(),
        format!("echo x > '/proc/self/root{out_dir}/new'"),
        "echo x > /proc/self/cwd/../outside/new".to_owned(),
        format!("ln mine '{out_dir}/new'"),
        format!("ln '{out_dir}/victim' hardlink && echo x >> hardlink"),
        format!("mv mine '{out_dir}/new'"),
        format!("mv '{out_dir}/victim' stolen"),
        format!("mkdir '{out_dir}/new'"),
        format!("ln -s /etc/passwd '{out_dir}/new'"),
        format!("truncate -s 0 '{out_dir}/victim'"),
        "truncate -s 0 escape/victim".to_owned(),
        format!("chmod 600 '{out_dir}/victim'"),
        format!("chown $(id -u):$(id -g) '{out_dir}/victim'"),
        format!("mkfifo '{out_dir}/new'"),
        format!("touch -d 2001-01-01 '{out_dir}/victim'"),
        format!("rm -f '{out_dir}/victim'"),
    ];
    let before = std::fs::metadata(&victim).unwrap();
    for attempt in &attempts {
        let out = env.sh("workspace-write", attempt);
        assert_command_failed(&out);
        assert!(
            !env.outside.join("new").exists(),
            "`{attempt}` created a file outside"
        );
        let after = std::fs::metadata(&victim)
            .unwrap_or_else(|e| panic!("`{attempt}` removed the victim: {e}"));
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap_or_default(),
            "original",
            "`{attempt}`"
        );
        assert_eq!(
            (after.mode(), after.uid(), after.mtime(), after.ctime()),
            (before.mode(), before.uid(), before.mtime(), before.ctime()),
            "`{attempt}` changed the victim's metadata"
        );
    }
    // (`mv outside/victim stolen` may leave a *copy* in the workspace: reading is allowed.)
    assert!(env.ws.join("mine").exists());
}

#[test]
fn mknod_and_device_writes_are_refused_outside_and_allowed_on_dev_null() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let fifo = env.outside.join("fifo");
    assert_eq!(
        env.probe("workspace-write", &["mknod", &fifo.to_string_lossy()]),
        format!("err:{}", refused_write().0)
    );
    assert!(!fifo.exists());
    assert_eq!(
        env.probe(
            "workspace-write",
            &["mknod", &env.ws.join("fifo").to_string_lossy()]
        ),
        "ok"
    );
}

/// An `inotify` watch is added where the sandbox may write (its events arrive) and refused
/// elsewhere with a marker: in `read-only` the workspace needs `workspace-write`, a host
/// directory full access. A host process's activity outside is never reported inside.
#[test]
fn inotify_watches_only_where_the_sandbox_may_write() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir_all(env.ws.join("src")).unwrap();
    env.put(
        "watch.py",
        r#"import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
refused = False
for path in sys.argv[1:]:
    wd = libc.inotify_add_watch(fd, path.encode(), 0x100)
    print(path, "watched" if wd >= 0 else os.strerror(ctypes.get_errno()))
    refused |= wd < 0
    if wd >= 0:
        open(os.path.join(path, "made"), "w").close()
        w, mask = struct.unpack("iI", os.read(fd, 4096)[:8])
        print(path, "event" if w == wd and mask == 0x100 else "no event")
sys.exit(3 if refused else 0)
"#,
        0o644,
    );
    let outside = env.outside.display().to_string();
    let out = output(
        env.sandgate("workspace-write")
            .args(["--", "python3", "watch.py", "src", &outside]),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if docker_harness() {
        // The supervisor cannot reach the caller's inotify instance there: no watch at all.
        assert!(text.contains("src Bad file descriptor"), "{}", show(&out));
        assert!(!text.contains("watched"), "{}", show(&out));
        return;
    }
    assert!(text.contains("src watched\nsrc event"), "{}", show(&out));
    assert!(
        text.contains(&format!("{outside} Permission denied")),
        "{}",
        show(&out)
    );
    let out = output(
        env.sandgate("read-only")
            .args(["--", "python3", "watch.py", "src", &outside]),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("src Permission denied"),
        "{}",
        show(&out)
    );
    if observing() {
        let needed: Vec<(String, String)> = stderr_markers(&out)
            .iter()
            .filter(|m| m["op"] == "watch")
            .map(|m| {
                (
                    m["path"].as_str().unwrap_or_default().to_owned(),
                    m["needed"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert!(
            needed
                .iter()
                .any(|(p, n)| p.ends_with("/src") && n == "workspace-write")
                && needed
                    .iter()
                    .any(|(p, n)| p == &outside && n == "full-access"),
            "{needed:?} {}",
            show(&out)
        );
    }
}
