//! Copy-on-write toolchain caches under `workspace-write`: every cache of the profile is
//! writable inside, through a layer of the workspace's own, while the host's cache stays
//! byte-for-byte as it was; what one call leaves there is seen by the next call in the
//! same workspace only, until `sandgate tmp --clean`; persistence paths and credentials
//! around the caches stay as they were; a symlink at a cache's path is not followed.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};
use support::{assert_status, output, read_markers, TestEnv};

/// The profile's directory caches, relative to the home.
const DIRS: [&str; 8] = [
    ".cargo/registry",
    ".cargo/git",
    ".npm",
    ".cache/pip",
    ".cache/go-build",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
];

/// The profile's single-file caches (cargo's lock files and its cache-tracking database).
const FILES: [&str; 3] = [
    ".cargo/.package-cache",
    ".cargo/.package-cache-mutate",
    ".cargo/.global-cache",
];

/// A test environment with a home of its own holding warm caches.
struct Home {
    env: TestEnv,
    home: PathBuf,
}

impl Home {
    fn new() -> Home {
        let env = TestEnv::new();
        let home = env.root.join("home");
        for dir in DIRS {
            let d = home.join(dir);
            std::fs::create_dir_all(d.join("sub")).unwrap();
            write(&d.join("keep.txt"), &format!("kept in {dir}\n"));
            write(&d.join("gone.txt"), "removed inside\n");
            write(&d.join("sub/nested.bin"), "\u{0}\u{1}binary\n");
        }
        for file in FILES {
            write(&home.join(file), "");
        }
        std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
        write(&home.join(".cargo/bin/x"), "#!/bin/sh\necho tool\n");
        write(
            &home.join(".cargo/credentials.toml"),
            "token = \"secret\"\n",
        );
        Home { env, home }
    }

    /// A sandgate command in `workspace` (the test's own by default) with this home.
    fn sandgate(&self, mode: &str, workspace: Option<&Path>) -> Command {
        let mut cmd = self.env.sandgate_without_workspace(mode);
        cmd.arg("--workspace")
            .arg(workspace.unwrap_or(&self.env.ws))
            .env("HOME", &self.home);
        cmd
    }

    /// Runs a shell script under `workspace-write` in `workspace`; returns the output and
    /// the denial log's markers.
    fn sh(&self, workspace: Option<&Path>, script: &str) -> (Output, Vec<serde_json::Value>) {
        let log = self.env.root.join("denials.ndjson");
        let _ = std::fs::remove_file(&log);
        let mut cmd = self.sandgate("workspace-write", workspace);
        cmd.arg("--denial-log")
            .arg(&log)
            .args(["--", "/bin/sh", "-c", script]);
        let out = output(&mut cmd);
        let denials = support::sandbox_denials(&log);
        (out, denials)
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every entry beneath `dir`: its type, mode, and content hash (or link target).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let meta = path.symlink_metadata().unwrap();
            let rel = path.strip_prefix(base).unwrap_or(&path).to_path_buf();
            let mode = meta.permissions().mode();
            let desc = if meta.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).ok())
            } else if meta.is_dir() {
                walk(base, &path, out);
                format!("dir {mode:o}")
            } else {
                let data = std::fs::read(&path).unwrap();
                let hash: String = Sha256::digest(&data)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("file {mode:o} {} {hash}", meta.size())
            };
            out.insert(rel, desc);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The mounts of the test process's own (the host's) namespace that lie beneath `dir`.
fn host_mounts_beneath(dir: &Path) -> Vec<String> {
    let needle = format!(" {}", dir.display());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_owned)
        .collect()
}

/// The host path of `workspace`'s cache layers (beside its private temp).
fn layers_of(h: &Home, workspace: &Path) -> PathBuf {
    let mut cmd = Command::new(support::sandgate());
    h.env.isolate(&mut cmd);
    let out = output(cmd.arg("tmp").arg("--workspace").arg(workspace));
    assert_status(&out, 0);
    PathBuf::from(format!("{}.caches", stdout(&out).trim()))
}

#[test]
fn each_cache_is_writable_inside_and_the_host_cache_unchanged() {
    let h = Home::new();
    let before = snapshot(&h.home);
    let mut script = String::from("set -e\n");
    for dir in DIRS {
        script.push_str(&format!(
            "d=\"$HOME/{dir}\"; echo new > \"$d/new.txt\"; echo more >> \"$d/keep.txt\"; \
             rm \"$d/gone.txt\"; rm -r \"$d/sub\"; mkdir \"$d/made\"; echo x > \"$d/made/f\"; \
             chmod 600 \"$d/keep.txt\"; cat \"$d/keep.txt\"\n"
        ));
    }
    for file in FILES {
        script.push_str(&format!(
            "echo locked >> \"$HOME/{file}\"; cat \"$HOME/{file}\"\n"
        ));
    }
    script.push_str("echo done\n");
    let (out, denials) = h.sh(None, &script);
    assert_status(&out, 0);
    let shown = stdout(&out);
    for dir in DIRS {
        assert!(shown.contains(&format!("kept in {dir}\nmore\n")), "{shown}");
    }
    assert_eq!(shown.matches("locked\n").count(), FILES.len(), "{shown}");
    assert!(shown.ends_with("done\n"), "{shown}");
    assert!(
        denials.is_empty(),
        "no marker for writes in the caches: {denials:?}"
    );
    assert_eq!(snapshot(&h.home), before, "the host's caches are unchanged");
    assert_eq!(
        host_mounts_beneath(&h.home),
        Vec::<String>::new(),
        "no overlay is left on the host"
    );
}

#[test]
fn a_planted_file_stays_in_its_workspace_until_cleaned() {
    let h = Home::new();
    let planted = h.home.join(".npm/planted");
    let (out, denials) = h.sh(None, "echo planted > \"$HOME/.npm/planted\"");
    assert_status(&out, 0);
    assert!(denials.is_empty(), "{denials:?}");
    assert!(
        !planted.exists(),
        "the host does not see what the sandbox wrote"
    );
    let layers = layers_of(&h, &h.env.ws);
    assert!(layers.is_dir(), "{} holds the layers", layers.display());
    let mode = std::fs::metadata(&layers).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the layers are the caller's alone");

    // The next call in the same workspace sees it; no sandbox sees any layer directory.
    let (out, _) = h.sh(
        None,
        &format!(
            "cat \"$HOME/.npm/planted\"; test -e '{}' && echo layers-visible; true",
            layers.display()
        ),
    );
    assert_status(&out, 0);
    assert_eq!(stdout(&out), "planted\n");

    // Another workspace does not.
    let other = h.env.root.join("other-ws");
    std::fs::create_dir(&other).unwrap();
    let check = "if test -e \"$HOME/.npm/planted\"; then echo present; else echo absent; fi";
    let (out, _) = h.sh(Some(&other), check);
    assert_status(&out, 0);
    assert_eq!(stdout(&out), "absent\n");

    // `sandgate tmp --clean` removes the layers with the private temp.
    let mut cmd = Command::new(support::sandgate());
    h.env.isolate(&mut cmd);
    let out = output(cmd.args(["tmp", "--clean", "--workspace"]).arg(&h.env.ws));
    assert_status(&out, 0);
    assert!(!layers.exists(), "{} is removed", layers.display());
    let (out, _) = h.sh(None, check);
    assert_status(&out, 0);
    assert_eq!(stdout(&out), "absent\n");
}

#[test]
fn persistence_paths_and_credentials_around_the_caches_stay_as_they_were() {
    let h = Home::new();
    let script = "echo evil > \"$HOME/.cargo/bin/x\" && echo wrote-bin; \
                  echo evil > \"$HOME/.cargo/config.toml\" && echo wrote-config; \
                  printf 'creds[%s]\\n' \"$(cat \"$HOME/.cargo/credentials.toml\")\"";
    let (out, denials) = h.sh(None, script);
    assert_eq!(stdout(&out), "creds[]\n");
    assert!(
        denials.iter().any(|d| d["path"]
            .as_str()
            .is_some_and(|p| p.ends_with(".cargo/bin/x"))),
        "the refused write is reported: {denials:?}"
    );
    assert_eq!(
        std::fs::read_to_string(h.home.join(".cargo/bin/x")).unwrap_or_default(),
        "#!/bin/sh\necho tool\n"
    );
    assert!(!h.home.join(".cargo/config.toml").exists());
    // Control: the credentials are there to read without the sandbox.
    let mut cmd = h.sandgate("full-access", None);
    cmd.args(["--", "cat"])
        .arg(h.home.join(".cargo/credentials.toml"));
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert_eq!(stdout(&out), "token = \"secret\"\n");
}

#[test]
fn a_symlink_at_a_cache_path_is_not_followed() {
    let h = Home::new();
    let elsewhere = h.env.outside.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    write(&elsewhere.join("keep"), "keep\n");
    let npm = h.home.join(".npm");
    std::fs::remove_dir_all(&npm).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &npm).unwrap();
    let before = snapshot(&h.env.outside);
    let (out, _) = h.sh(
        None,
        "echo x > \"$HOME/.npm/new\" && echo wrote-npm; \
         echo x > \"$HOME/.cache/pip/new\" && echo wrote-pip; \
         grep -c overlay /proc/self/mountinfo >/dev/null; \
         awk '$5 ~ /elsewhere/ {print \"mounted\"}' /proc/self/mountinfo",
    );
    assert_eq!(
        stdout(&out),
        "wrote-pip\n",
        "the linked cache stays read-only, the others work"
    );
    assert_eq!(
        snapshot(&h.env.outside),
        before,
        "the link's target is unchanged"
    );
}

/// `go build` with the module and build caches warm on the host: a module proxy in a
/// directory (`GOPROXY=file://…`) fills the host's `~/go/pkg/mod`, then the build runs in
/// the sandbox with no network (`GOPROXY=off`), writing its build cache.
#[test]
fn go_build_uses_the_host_caches_and_changes_none_of_them() {
    let go = Path::new("/usr/bin/go");
    assert!(
        go.exists(),
        "go is missing (on Debian: apt-get install golang-go)"
    );
    let h = Home::new();
    // Go's own caches are made by go: start from none.
    for dir in ["go", ".cache/go-build"] {
        std::fs::remove_dir_all(h.home.join(dir)).unwrap();
    }
    let proxy = h.env.root.join("proxy/example.com/dep/@v");
    std::fs::create_dir_all(&proxy).unwrap();
    write(&proxy.join("list"), "v0.1.0\n");
    write(
        &proxy.join("v0.1.0.info"),
        r#"{"Version":"v0.1.0","Time":"2024-01-01T00:00:00Z"}"#,
    );
    write(
        &proxy.join("v0.1.0.mod"),
        "module example.com/dep\n\ngo 1.19\n",
    );
    let zip = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import sys, zipfile\n\
             with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
             \x20   z.writestr('example.com/dep@v0.1.0/go.mod', 'module example.com/dep\\n\\ngo 1.19\\n')\n\
             \x20   z.writestr('example.com/dep@v0.1.0/dep.go', 'package dep\\n\\nfunc Hello() string { return \"hello from dep\" }\\n')\n",
        )
        .arg(proxy.join("v0.1.0.zip"))
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    assert_status(&zip, 0);
    write(
        &h.env.ws.join("go.mod"),
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/dep v0.1.0\n",
    );
    write(
        &h.env.ws.join("main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\t\"example.com/dep\"\n)\n\nfunc main() { fmt.Println(dep.Hello()) }\n",
    );
    let go_env = |cmd: &mut Command| {
        for var in [
            "GOPATH",
            "GOMODCACHE",
            "GOCACHE",
            "GOFLAGS",
            "GOPROXY",
            "GOROOT",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("HOME", &h.home)
            .env("GOSUMDB", "off")
            .env("GOTOOLCHAIN", "local");
    };
    let mut fetch = Command::new(go);
    h.env.isolate(&mut fetch);
    go_env(&mut fetch);
    fetch
        .current_dir(&h.env.ws)
        .env(
            "GOPROXY",
            format!("file://{}", h.env.root.join("proxy").display()),
        )
        .args(["mod", "download", "-x", "example.com/dep"]);
    let out = output(&mut fetch);
    assert_status(&out, 0);
    assert!(h
        .home
        .join("go/pkg/mod/example.com/dep@v0.1.0/dep.go")
        .exists());
    std::fs::create_dir_all(h.home.join(".cache/go-build")).unwrap();
    let before = snapshot(&h.home);

    let log = h.env.root.join("denials.ndjson");
    let mut cmd = h.sandgate("workspace-write", None);
    go_env(&mut cmd);
    cmd.env("GOPROXY", "off")
        // No VCS stamp: a repository around the test's directory would have go run git
        // there, outside the workspace.
        .env("GOFLAGS", "-mod=mod -buildvcs=false")
        .env("PATH", "/usr/bin:/bin")
        .arg("--denial-log")
        .arg(&log)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "go build -o app . && ./app && ls \"$HOME/.cache/go-build\" | wc -l",
        ]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    let shown = stdout(&out);
    assert!(shown.starts_with("hello from dep\n"), "{shown}");
    let entries: u32 = shown
        .lines()
        .nth(1)
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(entries > 0, "the build cache was written inside: {shown}");
    let denials = support::sandbox_denials(&log);
    assert!(denials.is_empty(), "{denials:?}");
    assert_eq!(
        snapshot(&h.home),
        before,
        "the host's go caches are unchanged"
    );
    assert!(h.env.ws.join("app").exists());
    // Go makes its module cache read-only; let the test directory be removed.
    let mut chmod = Command::new("chmod");
    chmod.args(["-R", "u+w"]).arg(h.home.join("go"));
    assert_status(&output(&mut chmod), 0);
}

/// `cargo build --offline` of a project with a dependency, from a registry cache the host
/// warmed (a `cargo fetch` against a stand-in registry, outside any sandbox): it succeeds
/// inside without a marker and without a request, and the host's `~/.cargo` is unchanged.
#[test]
fn cargo_build_offline_uses_the_host_registry_cache_and_changes_none_of_it() {
    use support::registry::{cargo_fetch, cargo_fetched, cargo_project, rust_toolchain, StandIn};
    let h = Home::new();
    // Cargo's own caches are made by cargo: start from none.
    for dir in ["registry", "git"] {
        std::fs::remove_dir_all(h.home.join(".cargo").join(dir)).unwrap();
    }
    for file in FILES {
        std::fs::remove_file(h.home.join(file)).unwrap();
    }
    let stand_in = StandIn::registries(&h.env.root.join("registry"));
    let project = h.env.ws.join("app");
    let cargo_home = h.home.join(".cargo");
    cargo_project(&stand_in, &project, &cargo_home);
    let warm = cargo_fetch(&project, &cargo_home);
    let mut fetch = Command::new(&warm[0]);
    h.env.isolate(&mut fetch);
    support::registry::without_host_proxies(&mut fetch);
    fetch.args(&warm[1..]).env("HOME", &h.home);
    assert_status(&output(&mut fetch), 0);
    assert!(cargo_fetched(&cargo_home), "the host's cache is warm");
    stand_in.clear();
    let before = snapshot(&h.home);

    let (cargo, rustc) = rust_toolchain();
    let log = h.env.root.join("denials.ndjson");
    let mut cmd = h.sandgate("workspace-write", None);
    support::registry::without_host_proxies(&mut cmd);
    cmd.arg("--denial-log").arg(&log).arg("--").arg("env");
    cmd.arg(format!("CARGO_HOME={}", cargo_home.display()))
        .arg(format!("RUSTC={}", rustc.display()))
        .arg(cargo)
        .args(["build", "--offline", "--manifest-path"])
        .arg(project.join("Cargo.toml"));
    let out = output(&mut cmd);
    assert_status(&out, 0);
    let denials = support::sandbox_denials(&log);
    assert!(denials.is_empty(), "{denials:?}");
    assert!(stand_in.seen().is_empty(), "{:?}", stand_in.seen());
    assert!(project.join("target/debug/libsgapp.rlib").exists());
    // The one change on the host: a cache the host lacked (cargo fetch makes no
    // `~/.cargo/git`) was created, empty, so that it could be a layer at all.
    let mut after = snapshot(&h.home);
    assert!(!before.contains_key(Path::new(".cargo/git")));
    assert!(
        after
            .remove(Path::new(".cargo/git"))
            .is_some_and(|d| d.starts_with("dir ")),
        "{after:?}"
    );
    assert_eq!(after, before, "the host's cargo caches are unchanged");
}

/// When the kernel refuses a cache's overlay (here: root without `CAP_DAC_OVERRIDE`, as in
/// a trimmed container), that cache stays read-only, sandgate says so once on stderr, and a
/// write there gets its marker like any read-only path. Unprivileged, the same call gets
/// its layers (in a user namespace of its own) and the write succeeds.
#[test]
fn a_cache_the_kernel_will_not_layer_stays_read_only_and_says_so() {
    let h = Home::new();
    let log = h.env.root.join("denials.ndjson");
    let mut cmd = h.sandgate("workspace-write", None);
    cmd.arg("--denial-log")
        .arg(&log)
        .args(["--", "/bin/sh", "-c", "echo x > \"$HOME/.npm/new\""]);
    let out = output(&mut support::bound_by_file_modes(cmd));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let markers = read_markers(&log);
    if support::is_root() {
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        let npm = h.home.join(".npm");
        assert!(
            stderr.contains(&format!(
                "sandgate: note: {} stays read-only: the kernel refused its copy-on-write layer",
                npm.display()
            )),
            "{stderr}"
        );
        let new = npm.join("new").display().to_string();
        assert!(
            markers.iter().any(|m| m["path"] == new.as_str()),
            "{markers:?}"
        );
    } else {
        assert_status(&out, 0);
        assert!(markers.is_empty(), "{markers:?}");
    }
    assert!(!h.home.join(".npm/new").exists());
}
