//! Performed writes: in every writable area landlock refuses the sandbox each create,
//! write open, rename and link, and the supervisor performs them after the seal rules
//! looked at the exact name it resolved. These tests attack that mechanism — racing path
//! buffers and swapped directories, every door to a sealed name (`config`, `hooks`,
//! `.sandgate`) — and check that ordinary work comes out as the kernel would make it, with
//! the caller's own rights. (`git_integrity.rs` attacks guarded repositories as a whole.)

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use crate::support::*;

/// Configuration that makes git run a program.
const EVIL: &str = "[core]\n\tfsmonitor = \"touch /tmp/sandgate-pwned\"\n";

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .mode()
        & 0o7777
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Runs the probe with `args` under workspace-write with a denial log: what it printed,
/// and the log's markers.
fn probe_logged(env: &TestEnv, args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let probe = probe();
    let mut argv = vec![probe.to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let (out, markers) = env.run_logged("workspace-write", &argv);
    (
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        markers,
    )
}

/// Asserts that `args` fail with EPERM under workspace-write with one marker of `op` for
/// `path` (when observing), and succeed under full-access (the control).
#[track_caller]
fn assert_sealed(env: &TestEnv, args: &[&str], op: &str, path: &Path) {
    let (got, markers) = probe_logged(env, args);
    assert_eq!(got, "err:EPERM", "{args:?}");
    if observing() {
        let m = markers
            .iter()
            .find(|m| m["path"] == path.display().to_string().as_str())
            .unwrap_or_else(|| panic!("{args:?}: no marker for {}: {markers:?}", path.display()));
        assert_eq!(m["op"], op, "{args:?}: {m}");
        assert_eq!(m["needed"], "full-access", "{args:?}: {m}");
        assert!(m["message"].as_str().is_some_and(|t| !t.is_empty()), "{m}");
    } else {
        assert!(markers.is_empty(), "{markers:?}");
    }
}

#[test]
fn a_path_flipped_to_config_while_it_is_opened_or_renamed_never_plants_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let dir = env.ws.join("r");
    std::fs::create_dir(&dir).unwrap();
    let d = dir.to_string_lossy().into_owned();
    for op in ["flip-open", "flip-rename"] {
        // Control: unconfined, the flipped buffer does reach `config`.
        let _ = std::fs::remove_file(dir.join("config"));
        let out = env.probe("full-access", &[op, &d, "300"]);
        assert!(
            read(&dir.join("config")).contains("fsmonitor"),
            "control {op}: {out}"
        );
        std::fs::remove_file(dir.join("config")).unwrap();

        let out = env.probe("workspace-write", &[op, &d, "3000"]);
        let done: u64 = out
            .split_whitespace()
            .skip_while(|w| *w != "done")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{op}: {out}"));
        assert!(done > 0, "{op}: the benign side never succeeded: {out}");
        assert!(
            !dir.join("config").exists(),
            "{op}: config planted: {out}: {:?}",
            read(&dir.join("config"))
        );
    }
}

#[test]
fn a_directory_swapped_for_a_symlink_while_planting_through_it_plants_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let prepare = || {
        let env = TestEnv::new();
        for dir in ["d/hooks", "g/hooks"] {
            std::fs::create_dir_all(env.ws.join(dir)).unwrap();
        }
        for y in ["d/hooks/y", "g/hooks/y"] {
            write(&env.ws.join(y), "#!/bin/sh\n");
        }
        std::os::unix::fs::symlink("g", env.ws.join("dl")).unwrap();
        env
    };
    // Whichever of `d` and `dl` the directory ends under.
    let breaches = |env: &TestEnv| {
        let mut found = vec![];
        for dir in ["d", "dl", "g"] {
            for hook in ["x", "y"] {
                let path = env.ws.join(dir).join("hooks").join(hook);
                if path.exists() && mode(&path) & 0o111 != 0 {
                    found.push(path.display().to_string());
                }
            }
            if read(&env.ws.join(dir).join("config")).contains("pager") {
                found.push(format!("{dir}/config"));
            }
        }
        found
    };
    // Control: unconfined, every plant lands.
    let env = prepare();
    let out = env.probe("full-access", &["swap-race", "200"]);
    assert!(!breaches(&env).is_empty(), "control planted nothing: {out}");

    let env = prepare();
    let out = env.probe("workspace-write", &["swap-race", "2000"]);
    assert!(out.starts_with("swaps"), "{out}");
    assert_eq!(breaches(&env), Vec::<String>::new(), "{out}");
}

#[test]
fn configuration_comes_only_by_a_checked_rename_through_every_door() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ws = &env.ws;
    let r = ws.join("r");
    write(&r.join("config"), "[core]\n\tbare = false\n");
    write(&ws.join("evil"), EVIL);
    write(
        &ws.join("benign"),
        "[core]\n\tbare = false\n[user]\n\temail = a@b\n",
    );
    std::os::unix::fs::symlink("config", r.join("c")).unwrap();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let config = r.join("config");
    let fresh = ws.join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let dangling = fresh.join("c");
    std::os::unix::fs::symlink("config", &dangling).unwrap();
    for (args, path) in [
        (vec!["write", &*s(&config)], config.clone()),
        (
            vec!["create", &*s(&fresh.join("config"))],
            fresh.join("config"),
        ),
        (vec!["create", &*s(&dangling)], dangling.clone()),
        (vec!["reopen", &*s(&config)], config.clone()),
        (
            vec!["rename", &*s(&ws.join("evil")), &*s(&config)],
            config.clone(),
        ),
        (
            vec!["link", &*s(&ws.join("evil")), &*s(&fresh.join("config"))],
            fresh.join("config"),
        ),
        (
            vec!["symlink", "elsewhere", &*s(&fresh.join("config"))],
            fresh.join("config"),
        ),
        (
            vec!["mknod", &*s(&fresh.join("config"))],
            fresh.join("config"),
        ),
        (
            vec![
                "tmpfile-link",
                &*s(&fresh),
                &*s(&fresh.join("config")),
                "proc",
                "644",
            ],
            fresh.join("config"),
        ),
        (
            vec![
                "tmpfile-link",
                &*s(&fresh),
                &*s(&fresh.join("config")),
                "empty",
                "644",
            ],
            fresh.join("config"),
        ),
        // A second name for a configuration file would write it.
        (
            vec!["link", &*s(&config), &*s(&ws.join("alias"))],
            ws.join("alias"),
        ),
    ] {
        assert_sealed(&env, &args, "git_config", &path);
        assert_eq!(read(&config), "[core]\n\tbare = false\n", "{args:?}");
        assert!(!fresh.join("config").exists(), "{args:?}");
        assert!(!ws.join("alias").exists(), "{args:?}");
    }
    // The shell's and coreutils' doors.
    for script in [
        "cp evil r/config",
        "cat evil > r/config",
        "mv evil r/config",
        "cp evil fresh/config",
        "ln -s ../evil fresh/config",
    ] {
        let out = env.sh("workspace-write", script);
        assert_command_failed(&out);
        assert_eq!(read(&config), "[core]\n\tbare = false\n", "{script}");
        assert!(!fresh.join("config").exists(), "{script}");
    }
    // Git's own way works: a checked file renamed into place, the same by a link (its
    // source stays), each landing as a file of its own.
    let (got, markers) = probe_logged(&env, &["rename", &*s(&ws.join("benign")), &*s(&config)]);
    assert_eq!(got, "ok");
    assert!(markers.is_empty(), "{markers:?}");
    assert!(read(&config).contains("email"));
    assert!(!ws.join("benign").exists());
    write(&ws.join("benign2"), "[user]\n\tname = t\n");
    assert_eq!(
        env.probe(
            "workspace-write",
            &["link", &*s(&ws.join("benign2")), &*s(&fresh.join("config"))]
        ),
        "ok"
    );
    assert!(ws.join("benign2").exists());
    let (a, b) = (
        std::fs::metadata(ws.join("benign2")).unwrap(),
        std::fs::metadata(fresh.join("config")).unwrap(),
    );
    assert_ne!(a.ino(), b.ino(), "a copy, not a second name");
    // A configuration that keeps a program the old one named, as it was, is fine.
    write(&config, EVIL);
    write(&ws.join("keeps"), &format!("{EVIL}[user]\n\tname = t\n"));
    assert_eq!(
        env.probe(
            "workspace-write",
            &["rename", &*s(&ws.join("keeps")), &*s(&config)]
        ),
        "ok"
    );
    assert!(read(&config).contains("name = t"));
}

#[test]
fn a_rename_refused_as_configuration_names_the_entry() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    write(&env.ws.join("r/config"), "[core]\n\tbare = false\n");
    write(
        &env.ws.join("new"),
        "[core]\n\tbare = false\n[alias]\n\tx = !sh -c evil\n",
    );
    let (got, markers) = probe_logged(
        &env,
        &[
            "rename",
            &env.ws.join("new").to_string_lossy(),
            &env.ws.join("r/config").to_string_lossy(),
        ],
    );
    assert_eq!(got, "err:EPERM");
    assert!(
        env.ws.join("new").exists(),
        "a refused rename keeps its source"
    );
    if observing() {
        assert_eq!(markers.len(), 1, "{markers:?}");
        assert_eq!(markers[0]["op"], "git_config");
        assert_eq!(markers[0]["syscall"], "rename");
        let message = markers[0]["message"].as_str().unwrap_or_default();
        assert!(message.contains("alias.x"), "{message}");
    }
}

#[test]
fn nothing_in_a_hooks_directory_becomes_executable_through_any_door() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ws = &env.ws;
    let hooks = ws.join("repo/.git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    write(&hooks.join("plain"), "#!/bin/sh\n");
    write(&hooks.join("host-made"), "#!/bin/sh\n");
    chmod(&hooks.join("host-made"), 0o755);
    write(
        &ws.join("payload"),
        "#!/bin/sh\ntouch /tmp/sandgate-pwned\n",
    );
    chmod(&ws.join("payload"), 0o755);
    std::fs::create_dir(ws.join("scripts")).unwrap();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    for (args, path) in [
        (
            vec!["chmod-to", &*s(&hooks.join("plain")), "755"],
            hooks.join("plain"),
        ),
        (
            vec!["fchmod-to", &*s(&hooks.join("plain")), "700"],
            hooks.join("plain"),
        ),
        (
            vec!["acl-exec", &*s(&hooks.join("plain"))],
            hooks.join("plain"),
        ),
        (
            vec!["write", &*s(&hooks.join("host-made"))],
            hooks.join("host-made"),
        ),
        (
            vec![
                "link",
                &*s(&ws.join("payload")),
                &*s(&hooks.join("pre-commit")),
            ],
            hooks.join("pre-commit"),
        ),
        (
            vec!["link", &*s(&hooks.join("plain")), &*s(&ws.join("alias"))],
            ws.join("alias"),
        ),
        (
            vec![
                "symlink",
                &*s(&ws.join("payload")),
                &*s(&hooks.join("pre-commit")),
            ],
            hooks.join("pre-commit"),
        ),
        (
            vec![
                "symlink",
                &*s(&ws.join("scripts")),
                &*s(&ws.join("repo/hooks")),
            ],
            ws.join("repo/hooks"),
        ),
        (
            vec![
                "rename",
                &*s(&ws.join("scripts")),
                &*s(&ws.join("repo/hooks")),
            ],
            ws.join("repo/hooks"),
        ),
        (
            vec![
                "tmpfile-link",
                &*s(&hooks),
                &*s(&hooks.join("pre-commit")),
                "proc",
                "755",
            ],
            hooks.join("pre-commit"),
        ),
    ] {
        assert_sealed(&env, &args, "git_hook", &path);
        assert_eq!(mode(&hooks.join("plain")) & 0o111, 0, "{args:?}");
        assert!(!hooks.join("pre-commit").exists(), "{args:?}");
        assert!(!ws.join("repo/hooks").exists(), "{args:?}");
    }
    assert_eq!(read(&hooks.join("host-made")), "#!/bin/sh\n");
    // Made there or moved there, a file loses its execute bits; a mode without them is
    // the caller's to set.
    let script = format!(
        "set -e; cd '{}'; : > made; chmod 755 made || :; cp ../../../payload copied; \
         mv ../../../payload moved; chmod 640 plain; printf x > plain; \
         install -m 644 /dev/null installed; ! install -m 755 /dev/null exec; echo ok",
        hooks.display()
    );
    let out = env.sh("workspace-write", &script);
    assert_status(&out, 0);
    for name in ["made", "copied", "moved", "installed", "exec"] {
        assert_eq!(mode(&hooks.join(name)) & 0o111, 0, "{name}: {}", show(&out));
    }
    assert_eq!(mode(&hooks.join("plain")), 0o640);
    assert_eq!(
        read(&hooks.join("moved")),
        "#!/bin/sh\ntouch /tmp/sandgate-pwned\n"
    );
    // mkdir makes a hooks directory (empty); everything then obeys the rules.
    let out = env.sh(
        "workspace-write",
        "mkdir -p other/hooks && cp -p /bin/true other/hooks/pre-commit",
    );
    assert!(ws.join("other/hooks/pre-commit").exists(), "{}", show(&out));
    assert_eq!(mode(&ws.join("other/hooks/pre-commit")) & 0o111, 0);
}

#[test]
fn sandgate_s_project_configuration_cannot_be_made_or_changed_anywhere() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ws = &env.ws;
    // A project of its own deeper in the workspace, whose configuration exists.
    write(
        &ws.join("sub/.sandgate/config.json"),
        "{\"approval\":\"never\"}",
    );
    std::fs::create_dir(ws.join("d")).unwrap();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    for (args, path) in [
        (
            vec!["mkdir", &*s(&ws.join(".sandgate"))],
            ws.join(".sandgate"),
        ),
        (
            vec!["create", &*s(&ws.join(".sandgate"))],
            ws.join(".sandgate"),
        ),
        (
            vec!["symlink", "sub/.sandgate", &*s(&ws.join(".sandgate"))],
            ws.join(".sandgate"),
        ),
        (
            vec!["mknod", &*s(&ws.join(".sandgate"))],
            ws.join(".sandgate"),
        ),
        (
            vec!["rename", &*s(&ws.join("d")), &*s(&ws.join(".sandgate"))],
            ws.join(".sandgate"),
        ),
        (
            vec!["write", &*s(&ws.join("sub/.sandgate/config.json"))],
            ws.join("sub/.sandgate/config.json"),
        ),
        (
            vec!["create", &*s(&ws.join("sub/.sandgate/other"))],
            ws.join("sub/.sandgate/other"),
        ),
        (
            vec![
                "rename",
                &*s(&ws.join("sub/.sandgate")),
                &*s(&ws.join("aside")),
            ],
            ws.join("aside"),
        ),
    ] {
        assert_sealed(&env, &args, "project_config", &path);
        assert!(!ws.join(".sandgate").exists(), "{args:?}");
        assert_eq!(
            read(&ws.join("sub/.sandgate/config.json")),
            "{\"approval\":\"never\"}"
        );
        assert!(!ws.join("sub/.sandgate/other").exists());
    }
}

#[test]
fn everyday_writes_come_out_as_the_kernel_makes_them() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ws = &env.ws;
    let tarball = env.root.join("t.tar");
    let src = env.root.join("src");
    write(&src.join("a/b/c.txt"), "c\n");
    write(&src.join("x.sh"), "#!/bin/sh\necho x\n");
    chmod(&src.join("x.sh"), 0o755);
    std::os::unix::fs::symlink("a/b/c.txt", src.join("link")).unwrap();
    let out = output(
        Command::new("tar")
            .arg("cf")
            .arg(&tarball)
            .arg("-C")
            .arg(&src)
            .arg("."),
    );
    assert_status(&out, 0);
    let script = format!(
        r#"set -e
tar xf '{tar}'
test "$(cat a/b/c.txt)" = c && test -x x.sh && test "$(readlink link)" = a/b/c.txt
echo one > f && echo two >> f && test "$(cat f)" = "$(printf 'one\ntwo')"
mkfifo p && (cat p > from-fifo &) && echo via-fifo > p && sleep 0.2 && test "$(cat from-fifo)" = via-fifo
mv f g && ln -s g h && test "$(cat h)" = "$(cat g)"
cp -a a a2 && test "$(cat a2/b/c.txt)" = c
/usr/bin/python3 - <<'EOF'
import os, socket, sqlite3, tempfile
with tempfile.NamedTemporaryFile(dir=".", delete=False) as t:
    t.write(b"t")
assert open(t.name, "rb").read() == b"t"
d = tempfile.mkdtemp(dir=".")
assert os.path.isdir(d)
db = sqlite3.connect("db.sqlite")
db.execute("create table t (x)")
db.execute("insert into t values (1)")
db.commit()
assert db.execute("select x from t").fetchone() == (1,)
s = socket.socket(socket.AF_UNIX)
s.bind("sock")
s.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect("sock")
if os.environ.get("NO_SHM") is None:
    shm = os.open("/dev/shm/sandgate-test", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(shm, b"s")
EOF
'{probe}' tmpfile-link . named-tmpfile proc 600 >/dev/null
'{probe}' tmpfile-link . named-tmpfile-2 empty 600 >/dev/null
test "$(cat named-tmpfile)" = '#!/bin/sh' && test "$(cat named-tmpfile-2)" = '#!/bin/sh'
echo through-dev-stdout > /dev/stdout
echo done
"#,
        tar = tarball.display(),
        probe = probe().display()
    );
    let mut cmd = env.sandgate("workspace-write");
    // Appending: the command's own fd 1 and its `/dev/stdout` opened anew write one file.
    let stdout = std::fs::File::options()
        .append(true)
        .create(true)
        .open(ws.join("stdout.txt"))
        .unwrap();
    // (The landlock backend has no private /dev/shm: a known limit.)
    if landlock_backend() {
        cmd.env("NO_SHM", "1");
    }
    cmd.args(["--", "/bin/sh", "-c", &script]).stdout(stdout);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert_eq!(read(&ws.join("stdout.txt")), "through-dev-stdout\ndone\n");
    assert!(ws.join("named-tmpfile").exists());
}

#[test]
fn created_files_get_the_caller_s_umask_and_the_directory_s_group() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ws = &env.ws;
    let s = |p: &Path| p.to_string_lossy().into_owned();
    // In a container that refuses `unshare`, the supervisor shares sandgate's umask, which
    // the kernel applies on top of the command's (a known limit: only ever narrower).
    let sandgates = match docker_harness() {
        true => {
            let old = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
            nix::sys::stat::umask(old);
            old.bits()
        }
        false => 0,
    };
    for (file, mode, umask, want) in [
        ("a", "600", "002", 0o600),
        ("b", "666", "002", 0o664),
        ("c", "666", "077", 0o600),
        ("d", "777", "022", 0o755),
    ] {
        let got = env.probe(
            "workspace-write",
            &["create-mode", &*s(&ws.join(file)), mode, umask],
        );
        let want = want & !sandgates;
        assert!(got.starts_with(&format!("mode {want:o} ")), "{file}: {got}");
    }
    // A setgid directory hands its group to what is made in it. (As root it can be any
    // group; otherwise only the caller's own.)
    let sgid = ws.join("sgid");
    std::fs::create_dir(&sgid).unwrap();
    let group = if is_root() {
        100
    } else {
        nix::unistd::getegid().as_raw()
    };
    nix::unistd::chown(&sgid, None, Some(nix::unistd::Gid::from_raw(group))).unwrap();
    chmod(&sgid, 0o2775);
    let got = env.probe(
        "workspace-write",
        &["create-mode", &*s(&sgid.join("f")), "644", "022"],
    );
    assert_eq!(got, format!("mode 644 gid {group}\nok"));
}

#[test]
fn the_supervisor_lends_the_sandbox_no_right_it_does_not_have() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ws = &env.ws;
    // The caller's own file without write permission: no one without CAP_DAC_OVERRIDE
    // opens it for writing, and the sandbox has no capability (a root sandgate's
    // supervisor must not lend it its own).
    let ro = ws.join("read-only-file");
    write(&ro, "keep\n");
    chmod(&ro, 0o444);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    assert_eq!(
        env.probe("workspace-write", &["write", &*s(&ro)]),
        "err:EACCES"
    );
    // A directory the caller may not write to takes no new name.
    let locked = ws.join("locked");
    std::fs::create_dir(&locked).unwrap();
    chmod(&locked, 0o555);
    assert_eq!(
        env.probe("workspace-write", &["create", &*s(&locked.join("f"))]),
        "err:EACCES"
    );
    assert_eq!(
        env.probe("workspace-write", &["mkdir", &*s(&locked.join("d"))]),
        "err:EACCES"
    );
    chmod(&locked, 0o755);
    if is_root() {
        // Another user's private file, and a file of theirs to change the mode of: root
        // opens and changes both only through capabilities.
        let theirs = ws.join("theirs");
        write(&theirs, "theirs\n");
        chmod(&theirs, 0o600);
        nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(1234)), None).unwrap();
        assert_eq!(env.probe("full-access", &["write", &*s(&theirs)]), "ok");
        assert_eq!(
            env.probe("workspace-write", &["write", &*s(&theirs)]),
            "err:EACCES"
        );
        assert_eq!(
            env.probe("workspace-write", &["chmod-to", &*s(&theirs), "755"]),
            "err:EPERM"
        );
        assert_eq!(mode(&theirs), 0o600);
    }
    assert_eq!(read(&ro), "keep\n");
}

#[test]
fn a_writer_waiting_on_a_fifo_holds_up_no_other_call() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // A writer blocks on a FIFO nobody reads yet; meanwhile other writes go on, and a
    // reader that comes later lets the writer through.
    let script = "mkfifo p && (echo late > p &) && sleep 0.3 && echo other > other \
                  && test \"$(cat p)\" = late && echo ok";
    let out = env.sh("workspace-write", script);
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    assert_eq!(read(&env.ws.join("other")), "other\n");
}
