//! A home inside a writable root, chosen on purpose (`--workspace ~`): it stays writable
//! where the user works, but nothing a host program runs later is — every dot-entry of the
//! home and every entry of it that holds a `$PATH` directory or a path a startup file names
//! stays read-only, and no new entry appears in the home — while a copy-on-write cache still works and a path named with
//! `--writable-root` is writable as asked. The host's `python3` then runs no `.pth` the
//! sandbox planted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::home::{assert_marker_for, listing, read};
use crate::support::*;

/// Where `python3` with `home` as its home looks for `.pth` files (user site-packages).
fn user_site(home: &Path) -> PathBuf {
    let out = output(
        Command::new("/usr/bin/python3")
            .env("HOME", home)
            .args(["-c", "import site; print(site.getusersitepackages())"]),
    );
    assert_status(&out, 0);
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A home with the trees host programs run from, a project, a notes file, a directory on
/// `$PATH` (`tools/bin`) and one on `$PATH` that does not exist yet (`go/bin`).
fn home_with_tools(env: &TestEnv) -> (PathBuf, PathBuf) {
    let home = env.root.join("home");
    let site = user_site(&home);
    for dir in [
        site.clone(),
        home.join(".cargo/bin"),
        home.join(".pyenv/shims"),
        home.join(".config/app"),
        home.join("tools/bin"),
        home.join("go"),
        home.join("proj"),
    ] {
        std::fs::create_dir_all(&dir).unwrap();
    }
    for (file, text) in [
        (".bashrc", "# rc\n"),
        (".pyenv/shims/python", "#!/bin/sh\n"),
        (".config/app/settings", "x\n"),
        ("notes.txt", "notes\n"),
    ] {
        std::fs::write(home.join(file), text).unwrap();
    }
    (home, site)
}

/// `$PATH` for the calls: the home's two tool directories first.
fn path_with(home: &Path) -> String {
    format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        home.join("tools/bin").display(),
        home.join("go/bin").display()
    )
}

/// Runs `script` under workspace-write with the home as the workspace and `$PATH` from
/// [`path_with`].
fn in_home(env: &TestEnv, home: &Path, flags: &[&str], script: &str) -> Output {
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.current_dir(home)
        .env("HOME", home)
        .env("PATH", path_with(home))
        .arg("--workspace")
        .arg(home)
        .args(flags)
        .args(["--", "/bin/sh", "-c", script]);
    output(&mut cmd)
}

/// Runs the host's `python3` with `home`; returns whether it ran the planted `.pth`.
fn python_ran_a_pth(env: &TestEnv, home: &Path) -> bool {
    let ran = env.outside.join("pth-ran");
    let _ = std::fs::remove_file(&ran);
    let out = output(
        Command::new("/usr/bin/python3")
            .env("HOME", home)
            .env("PTH_RAN", &ran)
            .args(["-c", "pass"]),
    );
    assert_status(&out, 0);
    ran.exists()
}

/// A `.pth` line python runs at startup: it writes the file `$PTH_RAN` names.
const PTH: &str =
    "import os; open(os.environ['PTH_RAN'], 'w').close() if 'PTH_RAN' in os.environ else None\n";

#[test]
fn nothing_a_host_program_runs_later_is_writable_in_a_home_workspace() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, site) = home_with_tools(&env);
    let pth = site.join("evil.pth");
    std::fs::write(env.root.join("evil.pth"), PTH).unwrap();
    let planted = env.root.join("evil.pth").display().to_string();
    let attempts: Vec<(String, PathBuf)> = vec![
        (format!("cp '{planted}' '{}'", pth.display()), pth.clone()),
        (
            "echo 'import os' > ~/.pythonrc".into(),
            home.join(".pythonrc"),
        ),
        (
            "echo x > ~/.cargo/bin/cargo".into(),
            home.join(".cargo/bin/cargo"),
        ),
        (
            "echo evil >> ~/.pyenv/shims/python".into(),
            home.join(".pyenv/shims/python"),
        ),
        ("echo x > ~/tools/bin/ls".into(), home.join("tools/bin/ls")),
        ("mkdir ~/go/bin".into(), home.join("go/bin")),
        ("mkdir ~/.newdot".into(), home.join(".newdot")),
        (
            "echo x > ~/.config/app/settings".into(),
            home.join(".config/app/settings"),
        ),
        ("mv ~/.pyenv ~/pyenv-aside".into(), home.join(".pyenv")),
        (
            "rm -rf ~/.pyenv/shims".into(),
            home.join(".pyenv/shims/python"),
        ),
        (
            "mv ~/tools/bin ~/tools/bin-aside".into(),
            home.join("tools/bin"),
        ),
    ];
    let shims = listing(&home.join(".pyenv/shims"));
    for (attempt, path) in &attempts {
        let out = in_home(&env, &home, &[], attempt);
        assert_command_failed(&out);
        assert_marker_for(&out, path);
        assert!(!pth.exists(), "`{attempt}`");
        assert!(!home.join(".pythonrc").exists(), "`{attempt}`");
        assert!(!home.join(".newdot").exists(), "`{attempt}`");
        assert!(!home.join("go/bin").exists(), "`{attempt}`");
        assert_eq!(listing(&home.join(".pyenv/shims")), shims, "`{attempt}`");
        assert_eq!(read(&home.join(".pyenv/shims/python")), "#!/bin/sh\n");
        assert_eq!(listing(&home.join("tools/bin")), Vec::<String>::new());
    }
    // The host's python runs nothing the sandbox left...
    assert!(!python_ran_a_pth(&env, &home));
    // ... as it would have, had the .pth been written (the check can fail).
    std::fs::write(&pth, PTH).unwrap();
    assert!(python_ran_a_pth(&env, &home));
    std::fs::remove_file(&pth).unwrap();

    // The work the user chose the home for still works: its projects and plain files.
    let out = in_home(
        &env,
        &home,
        &[],
        "echo more >> notes.txt && echo ok > proj/new && mkdir proj/dir && mv proj/new proj/dir/",
    );
    assert_status(&out, 0);
    assert_eq!(read(&home.join("notes.txt")), "notes\nmore\n");
    assert_eq!(read(&home.join("proj/dir/new")), "ok\n");

    // Control: full access writes them.
    let mut cmd = env.sandgate_without_workspace("full-access");
    let out = output(cmd.env("HOME", &home).arg("--workspace").arg(&home).args([
        "--",
        "/bin/sh",
        "-c",
        "echo x > ~/.cargo/bin/cargo && touch ~/.pythonrc",
    ]));
    assert_status(&out, 0);
    assert!(home.join(".pythonrc").exists() && home.join(".cargo/bin/cargo").exists());
}

#[test]
fn a_writable_root_named_in_a_sealed_entry_is_writable_as_asked() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, site) = home_with_tools(&env);
    let root = site.display().to_string();
    let out = in_home(
        &env,
        &home,
        &["--writable-root", &root],
        &format!("echo installed > '{}/mod.py'", site.display()),
    );
    assert_status(&out, 0);
    assert_eq!(read(&site.join("mod.py")), "installed\n");
    // Only that one: the rest of ~/.local is still sealed.
    let out = in_home(
        &env,
        &home,
        &["--writable-root", &root],
        "mkdir -p ~/.local/bin && echo x > ~/.local/bin/tool",
    );
    assert_command_failed(&out);
    assert!(!home.join(".local/bin").exists());
}

/// An entry of the home that `$PATH` or a startup file reaches into is read-only whole:
/// `tools` for `tools/bin` on `$PATH` (a library next to the programs), `sdk` for the
/// script `.bashrc` sources. A project no startup file names stays writable, and so does
/// a sealed entry named with `--writable-root`.
#[test]
fn what_path_and_the_rc_file_reach_into_is_read_only_whole() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, _) = home_with_tools(&env);
    std::fs::create_dir_all(home.join("sdk")).unwrap();
    std::fs::write(home.join("sdk/init.sh"), "# sdk\n").unwrap();
    std::fs::write(home.join(".bashrc"), "source \"$HOME/sdk/init.sh\"\n").unwrap();
    let attempt = |what: &str, target: &str| {
        format!("if echo x >> {target} 2>/dev/null; then echo {what}=wrote; else echo {what}=refused; fi;")
    };
    let script = [
        attempt("sdk", "sdk/init.sh"),
        attempt("lib", "tools/lib.sh"),
        attempt("proj", "proj/file"),
    ]
    .concat();
    let out = in_home(&env, &home, &[], &script);
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "sdk=refused\nlib=refused\nproj=wrote\n",
        "{}",
        show(&out)
    );
    assert_eq!(read(&home.join("sdk/init.sh")), "# sdk\n");
    assert!(!home.join("tools/lib.sh").exists());
    let sdk = home.join("sdk").display().to_string();
    let out = in_home(
        &env,
        &home,
        &["--writable-root", &sdk],
        &attempt("sdk", "sdk/init.sh"),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "sdk=wrote\n",
        "{}",
        show(&out)
    );
    assert_eq!(read(&home.join("sdk/init.sh")), "# sdk\nx\n");
}

#[test]
fn a_cache_in_a_sealed_entry_keeps_its_copy_on_write_layer() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, _) = home_with_tools(&env);
    let registry = home.join(".cargo/registry/cache");
    std::fs::create_dir_all(&registry).unwrap();
    std::fs::write(registry.join("host.crate"), "host\n").unwrap();
    let out = in_home(
        &env,
        &home,
        &[],
        "echo fetched > ~/.cargo/registry/cache/new.crate && echo changed > ~/.cargo/registry/cache/host.crate && cat ~/.cargo/registry/cache/*.crate",
    );
    // The landlock backend has no copy-on-write layers (a known limit): the cache stays
    // read-only, and the host's is unchanged.
    if landlock_backend() {
        assert_command_failed(&out);
        assert_eq!(listing(&registry), ["host.crate"]);
        assert_eq!(read(&registry.join("host.crate")), "host\n");
        return;
    }
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "changed\nfetched\n");
    // The host's cache is unchanged; the layer is there for the next call in this workspace.
    assert_eq!(listing(&registry), ["host.crate"]);
    assert_eq!(read(&registry.join("host.crate")), "host\n");
    let out = in_home(&env, &home, &[], "cat ~/.cargo/registry/cache/new.crate");
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fetched\n");
    // The entry around it stays sealed.
    let out = in_home(&env, &home, &[], "echo x > ~/.cargo/config.toml");
    assert_command_failed(&out);
    assert_marker_for(&out, &home.join(".cargo/config.toml"));
    let mut cmd = std::process::Command::new(sandgate());
    env.isolate(&mut cmd);
    let out = output(cmd.arg("tmp").arg("--clean").arg("--workspace").arg(&home));
    assert_status(&out, 0);
}
