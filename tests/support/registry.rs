//! Stand-in package registries served by the test itself on a loopback address: a cargo
//! sparse registry, an npm registry and a PyPI simple index, with real archives built at
//! test time by the system's `tar` and Debian's python3 (nothing binary is committed). The
//! server records every request it answers, so a test can tell that a tool's request really
//! arrived (through sandgate's proxy, when the tool runs in a sandbox).
//!
//! Besides the registries it serves `/t/ANYTHING` with the text `served /t/ANYTHING`, for
//! tests that only need an upstream. It also answers absolute-URI requests (what a client
//! sends to a forwarding proxy) as if it were that proxy, which lets the host-side fixture
//! tests prove each tool honours the proxy variables for a loopback registry.

#![allow(dead_code)]

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256, Sha512};

use super::{assert_status, output};

/// The crate the cargo registry serves (one version, no dependencies).
pub const CRATE: &str = "sgdep";
/// The package the npm registry serves.
pub const NPM_PACKAGE: &str = "sgpkg";
/// The wheel the PyPI index serves.
pub const WHEEL: &str = "sgwheel-1.0-py3-none-any.whl";

/// The paths a successful `cargo fetch` of [`CRATE`] requests.
pub const CARGO_PATHS: [&str; 3] = [
    "/index/config.json",
    "/index/sg/de/sgdep",
    "/dl/sgdep/0.1.0/download",
];
/// The paths a successful `npm install` of [`NPM_PACKAGE`] requests.
pub const NPM_PATHS: [&str; 2] = ["/sgpkg", "/sgpkg/-/sgpkg-1.0.0.tgz"];
/// The paths a successful `pip download` of the wheel requests.
pub const PIP_PATHS: [&str; 2] = ["/simple/sgwheel/", "/packages/sgwheel-1.0-py3-none-any.whl"];

/// One request the stand-in answered.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// True when the request line held an absolute URI (`GET http://host/path`): the client
    /// took this server for a forwarding proxy.
    pub absolute: bool,
    pub status: u16,
}

struct Reply {
    content_type: &'static str,
    body: Vec<u8>,
}

/// A running stand-in; it stops serving when dropped.
pub struct StandIn {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl StandIn {
    /// Only the `/t/…` upstream, on `ip` (any 127/8 address works without setup).
    pub fn plain(ip: Ipv4Addr) -> StandIn {
        StandIn::start(ip, |_| HashMap::new())
    }

    /// All three registries on 127.0.0.1; `scratch` is a directory for building archives.
    pub fn registries(scratch: &Path) -> StandIn {
        StandIn::start(Ipv4Addr::LOCALHOST, |port| {
            let base = format!("http://127.0.0.1:{port}");
            let mut routes = HashMap::new();
            cargo_registry(&scratch.join("cargo"), &base, &mut routes);
            npm_registry(&scratch.join("npm"), &base, &mut routes);
            pypi_index(&scratch.join("pypi"), &mut routes);
            routes
        })
    }

    fn start(ip: Ipv4Addr, routes: impl FnOnce(u16) -> HashMap<String, Reply>) -> StandIn {
        let listener = TcpListener::bind((ip, 0))
            .unwrap_or_else(|e| panic!("cannot bind a stand-in on {ip}: {e}"));
        let addr = listener.local_addr().unwrap();
        let routes = Arc::new(routes(addr.port()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopping) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (routes, log) = (routes.clone(), log.clone());
                std::thread::spawn(move || answer(stream, &routes, &log));
            }
        });
        StandIn { addr, seen, stop }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `IP:PORT`, as `--allow-host` takes it.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    /// `http://IP:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request answered so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The paths requested so far, in order.
    pub fn paths(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.path).collect()
    }

    /// Whether `path` was requested and answered 200.
    pub fn served(&self, path: &str) -> bool {
        self.seen()
            .iter()
            .any(|s| s.path == path && s.status == 200)
    }

    /// Asserts that every one of `paths` was requested and answered 200.
    #[track_caller]
    pub fn assert_served(&self, paths: &[&str]) {
        for path in paths {
            assert!(
                self.served(path),
                "the stand-in at {} never served {path}; it saw {:?}",
                self.addr,
                self.seen()
            );
        }
    }

    /// Forgets the requests seen so far.
    pub fn clear(&self) {
        self.seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// Reads one request and answers it, then closes the connection (every reply says
/// `Connection: close`, which every client here honours).
fn answer(stream: TcpStream, routes: &HashMap<String, Reply>, log: &Mutex<Vec<Seen>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return;
    };
    let (method, target) = (method.to_owned(), target.to_owned());
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return,
            Ok(_) if header.trim().is_empty() => break,
            Ok(_) => {
                if let Some((name, value)) = header.split_once(':') {
                    if name.trim().eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
        }
    }
    let _ = std::io::copy(&mut (&mut reader).take(length as u64), &mut std::io::sink());
    let (absolute, path) = match target.strip_prefix("http://") {
        Some(rest) => (true, rest.find('/').map_or("/", |i| &rest[i..])),
        None => (false, target.as_str()),
    };
    let path = path.split('?').next().unwrap_or_default().to_owned();
    let found = routes.get(&path).map(|r| (r.content_type, r.body.clone()));
    let (status, content_type, body) = match found {
        Some((content_type, body)) => (200, content_type, body),
        None if path.starts_with("/t/") => (200, "text/plain", format!("served {path}").into()),
        None => (404, "text/plain", b"not found".to_vec()),
    };
    log.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(Seen {
            method: method.clone(),
            path,
            absolute,
            status,
        });
    let reason = if status == 200 { "OK" } else { "Not Found" };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes());
    if method != "HEAD" {
        let _ = stream.write_all(&body);
    }
    let _ = stream.flush();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `tar -czf ARCHIVE -C DIR TOP` with fixed owners and times (GNU tar).
fn tar_gz(dir: &Path, top: &str, archive: &Path) -> Vec<u8> {
    let out = output(
        Command::new("tar")
            .args([
                "--sort=name",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "--mtime=@1700000000",
                "-czf",
            ])
            .arg(archive)
            .arg("-C")
            .arg(dir)
            .arg(top),
    );
    assert_status(&out, 0);
    read(archive)
}

/// A sparse registry under `/index/` whose `config.json` sends downloads to `/dl/`.
fn cargo_registry(dir: &Path, base: &str, routes: &mut HashMap<String, Reply>) {
    let src = dir.join("sgdep-0.1.0");
    write(
        &src.join("Cargo.toml"),
        "[package]\nname = \"sgdep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        &src.join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    42\n}\n",
    );
    let krate = tar_gz(dir, "sgdep-0.1.0", &dir.join("sgdep-0.1.0.crate"));
    let config = serde_json::json!({
        "dl": format!("{base}/dl/{{crate}}/{{version}}/download"),
        "api": null,
    });
    let entry = serde_json::json!({
        "name": CRATE,
        "vers": "0.1.0",
        "deps": [],
        "cksum": hex(&Sha256::digest(&krate)),
        "features": {},
        "yanked": false,
    });
    routes.insert(
        CARGO_PATHS[0].into(),
        Reply {
            content_type: "application/json",
            body: config.to_string().into_bytes(),
        },
    );
    routes.insert(
        CARGO_PATHS[1].into(),
        Reply {
            content_type: "text/plain",
            body: format!("{entry}\n").into_bytes(),
        },
    );
    routes.insert(
        CARGO_PATHS[2].into(),
        Reply {
            content_type: "application/octet-stream",
            body: krate,
        },
    );
}

/// `GET /sgpkg` (the packument) and its tarball.
fn npm_registry(dir: &Path, base: &str, routes: &mut HashMap<String, Reply>) {
    let package = dir.join("package");
    write(
        &package.join("package.json"),
        r#"{"name":"sgpkg","version":"1.0.0","main":"index.js","license":"MIT"}"#,
    );
    write(&package.join("index.js"), "module.exports = 42;\n");
    let tgz = tar_gz(dir, "package", &dir.join("sgpkg-1.0.0.tgz"));
    use base64::Engine as _;
    let integrity = format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha512::digest(&tgz))
    );
    let sha1 = output(Command::new("sha1sum").arg(dir.join("sgpkg-1.0.0.tgz")));
    assert_status(&sha1, 0);
    let shasum = String::from_utf8_lossy(&sha1.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    let packument = serde_json::json!({
        "name": NPM_PACKAGE,
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {
            "name": NPM_PACKAGE,
            "version": "1.0.0",
            "main": "index.js",
            "license": "MIT",
            "dist": {
                "tarball": format!("{base}{}", NPM_PATHS[1]),
                "integrity": integrity,
                "shasum": shasum,
            },
        }},
    });
    routes.insert(
        NPM_PATHS[0].into(),
        Reply {
            content_type: "application/json",
            body: packument.to_string().into_bytes(),
        },
    );
    routes.insert(
        NPM_PATHS[1].into(),
        Reply {
            content_type: "application/octet-stream",
            body: tgz,
        },
    );
}

/// Builds a pure-python wheel (module, METADATA, WHEEL and a RECORD with real hashes).
const MAKE_WHEEL: &str = r#"
import base64, hashlib, sys, zipfile
files = {
    "sgwheel/__init__.py": b"ANSWER = 42\n",
    "sgwheel-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sgwheel\nVersion: 1.0\n",
    "sgwheel-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sandgate-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += "%s,sha256=%s,%d\n" % (name, digest, len(data))
files["sgwheel-1.0.dist-info/RECORD"] = (record + "sgwheel-1.0.dist-info/RECORD,,\n").encode()
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as wheel:
    for name, data in files.items():
        wheel.writestr(zipfile.ZipInfo(name, (2023, 11, 14, 0, 0, 0)), data)
"#;

/// `/simple/sgwheel/` (PEP 503 HTML) and the wheel under `/packages/`.
fn pypi_index(dir: &Path, routes: &mut HashMap<String, Reply>) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let path = dir.join(WHEEL);
    let out = output(Command::new(python()).args(["-c", MAKE_WHEEL]).arg(&path));
    assert_status(&out, 0);
    let wheel = read(&path);
    let page = format!(
        "<!DOCTYPE html>\n<html><body>\n<a href=\"../../packages/{WHEEL}#sha256={}\">{WHEEL}</a>\n</body></html>\n",
        hex(&Sha256::digest(&wheel))
    );
    routes.insert(
        PIP_PATHS[0].into(),
        Reply {
            content_type: "text/html",
            body: page.into_bytes(),
        },
    );
    routes.insert(
        PIP_PATHS[1].into(),
        Reply {
            content_type: "application/octet-stream",
            body: wheel,
        },
    );
}

/// Debian's python3, by path: the sandbox cannot read a python under /root.
pub fn python() -> PathBuf {
    PathBuf::from("/usr/bin/python3")
}

/// The cargo and rustc the cargo tests run: `$SANDGATE_TEST_RUST_SYSROOT/bin` (scripts/test
/// links the toolchain there for the unprivileged run, which cannot read /root), else the
/// toolchain of the cargo running the tests. Fails the test when neither runs.
pub fn rust_toolchain() -> (PathBuf, PathBuf) {
    let bin = match std::env::var_os("SANDGATE_TEST_RUST_SYSROOT") {
        Some(sysroot) => PathBuf::from(sysroot).join("bin"),
        None => {
            let cargo = std::env::var_os("CARGO")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO")));
            cargo.parent().unwrap_or(Path::new("/")).to_path_buf()
        }
    };
    let (cargo, rustc) = (bin.join("cargo"), bin.join("rustc"));
    for tool in [&cargo, &rustc] {
        let ran = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ran,
            "cannot run {}: set SANDGATE_TEST_RUST_SYSROOT to a toolchain (bin/cargo, bin/rustc) this user can run",
            tool.display()
        );
    }
    (cargo, rustc)
}

/// Writes `CARGO_HOME/config.toml` replacing crates.io with the stand-in's sparse index
/// (in CARGO_HOME because cargo reads `.cargo/config.toml` from the working directory, not
/// from the manifest's), and a project depending on [`CRATE`].
pub fn cargo_project(stand_in: &StandIn, project: &Path, cargo_home: &Path) {
    write(
        &cargo_home.join("config.toml"),
        &format!(
            "[source.crates-io]\nreplace-with = \"stand-in\"\n\n[source.stand-in]\nregistry = \"sparse+{}\"\n\n[net]\nretry = 0\n",
            stand_in.url("/index/")
        ),
    );
    write(
        &project.join("Cargo.toml"),
        "[package]\nname = \"sgapp\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nsgdep = \"0.1\"\n",
    );
    write(&project.join("src/lib.rs"), "pub use sgdep::answer;\n");
}

/// `cargo fetch` of the project [`cargo_project`] wrote, as an argv (through `env`, so it
/// runs the same on the host and in a sandbox).
pub fn cargo_fetch(project: &Path, cargo_home: &Path) -> Vec<OsString> {
    let (cargo, rustc) = rust_toolchain();
    let mut argv: Vec<OsString> = vec!["env".into()];
    argv.push(with("CARGO_HOME=", cargo_home));
    argv.push(with("RUSTC=", &rustc));
    argv.push(cargo.into());
    argv.extend(["fetch".into(), "--manifest-path".into()]);
    argv.push(project.join("Cargo.toml").into());
    argv
}

/// Where a successful [`cargo_fetch`] leaves the crate.
pub fn cargo_fetched(cargo_home: &Path) -> bool {
    let cache = cargo_home.join("registry/cache");
    std::fs::read_dir(&cache)
        .into_iter()
        .flatten()
        .flatten()
        .any(|dir| dir.path().join("sgdep-0.1.0.crate").is_file())
}

/// `npm install sgpkg` into `project` from the stand-in, with the cache, the user config and
/// the logs under `project`, no audit, no update check, no retries.
pub fn npm_install(stand_in: &StandIn, project: &Path) -> Vec<OsString> {
    std::fs::create_dir_all(project).unwrap_or_else(|e| panic!("{}: {e}", project.display()));
    let mut argv: Vec<OsString> = vec!["npm".into(), "install".into(), NPM_PACKAGE.into()];
    argv.push("--prefix".into());
    argv.push(project.into());
    argv.push(with("--cache=", &project.join(".npm-cache")));
    argv.push(with("--userconfig=", &project.join(".npmrc")));
    argv.push(format!("--registry={}", stand_in.url("/")).into());
    for flag in [
        "--no-audit",
        "--no-fund",
        "--update-notifier=false",
        "--fetch-retries=0",
        "--fetch-timeout=20000",
    ] {
        argv.push(flag.into());
    }
    argv
}

/// Where a successful [`npm_install`] leaves the package.
pub fn npm_installed(project: &Path) -> bool {
    project.join("node_modules/sgpkg/index.js").is_file()
}

/// `pip download sgwheel` into `dest`, or (with `install`) `pip install --target dest`.
pub fn pip(stand_in: &StandIn, dest: &Path, install: bool) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![python().into(), "-m".into(), "pip".into()];
    if install {
        argv.extend(["install".into(), "--target".into()]);
    } else {
        argv.extend(["download".into(), "--dest".into()]);
    }
    argv.push(dest.into());
    argv.push("sgwheel".into());
    argv.push(format!("--index-url={}", stand_in.url("/simple/")).into());
    // --isolated: no PIP_* variables nor user configuration of the host's (a PIP_FIND_LINKS
    // would add another source).
    for flag in [
        "--isolated",
        "--trusted-host=127.0.0.1",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-input",
        "--retries=0",
        "--timeout=20",
    ] {
        argv.push(flag.into());
    }
    argv
}

/// Where a successful [`pip`] leaves the wheel (download) or the module (install).
pub fn pip_done(dest: &Path, install: bool) -> bool {
    if install {
        dest.join("sgwheel/__init__.py").is_file()
    } else {
        dest.join(WHEEL).is_file()
    }
}

fn with(prefix: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(prefix);
    arg.push(path);
    arg
}

/// The proxy variables a tool would pick up from the host; the tests clear them so that
/// only what they set (or what sandgate sets inside) applies.
pub const PROXY_VARIABLES: [&str; 8] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Removes the host's proxy variables (and npm's and cargo's own proxy settings) from `cmd`.
pub fn without_host_proxies(cmd: &mut Command) -> &mut Command {
    for key in PROXY_VARIABLES {
        cmd.env_remove(key);
    }
    for key in [
        "npm_config_proxy",
        "npm_config_https_proxy",
        "NPM_CONFIG_PROXY",
        "NPM_CONFIG_HTTPS_PROXY",
        "CARGO_HTTP_PROXY",
        "PIP_PROXY",
    ] {
        cmd.env_remove(key);
    }
    cmd
}
