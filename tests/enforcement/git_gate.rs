//! Repositories made or changed *inside* the sandbox. Nothing a command does under
//! workspace-write makes the host's git run a program: not a repository it creates and
//! records as a gitlink, not a `.git` it plants by hand in a subdirectory or in a registered
//! submodule, not an executable hook, not an edit in place of another repository's
//! configuration — whichever way the bytes are written (`git config`, a redirection, a
//! renamed lock file, `cp`, a symlink, a hardlink, a directory renamed into place,
//! `O_TMPFILE` + `linkat`, a `/proc/self/fd` reopen). Nor can `.sandgate/` be created.
//!
//! After each attack the host's own git runs as a user would (a clean environment, `HOME`
//! at the test's own, in a pty where a pager matters), and every payload would leave a
//! file in a directory outside the workspace. A control under full-access shows that each
//! attack is real. Where the sandbox refuses, the refusal has its marker.
//!
//! The workflows git needs keep working inside, including the ones that write the
//! workspace repository's configuration (`git remote add`, `git config user.email`,
//! `git branch -u`, `git submodule add`/`update --init`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// The user's own git configuration, in the test's `HOME`: an alias and a pager they rely
/// on (which a repository's own would override), and what the tests' git needs.
const USER_GITCONFIG: &str = "[user]\n\tname = t\n\temail = t@example.com\n\
[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n\
[core]\n\tpager = cat\n[alias]\n\tst = status\n";

/// A workspace that is a repository with a commit, cloned from `origin.git` outside it;
/// `subsrc`, a repository outside it for submodules; a home; and the directory payloads
/// mark (outside the workspace).
pub(super) struct Gate {
    pub(super) env: TestEnv,
    pub(super) home: PathBuf,
    pub(super) out: PathBuf,
    pub(super) origin: PathBuf,
    pub(super) subsrc: PathBuf,
}

/// What the host's git does in a directory after an attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// `git status` (core.fsmonitor, includes, a filter on a file whose stat changed).
    Status,
    /// `git log -1` on a terminal, so that a pager runs.
    Log,
    /// `git st`, the user's alias.
    Alias,
    /// `git commit` (hooks, core.hooksPath).
    Commit,
}

/// One attempt: its own tag (the name of the file its payload would create), the commands
/// that prepare it inside (which must succeed), the attack itself, and the places where a
/// refusal of it may be marked.
struct Attempt {
    tag: String,
    setup: String,
    act: String,
    marked: Vec<PathBuf>,
    /// Whether the sandbox must refuse the attack outright (otherwise it may also succeed
    /// harmlessly, as a hook created without its execute bits does).
    refused: bool,
}

/// What one sandboxed run of attempts gave.
struct Run {
    out: Output,
    markers: Vec<serde_json::Value>,
    status: BTreeMap<String, i32>,
    setup_failed: Vec<String>,
}

/// Single-quotes `s` for the shell.
pub(super) fn sq(s: impl AsRef<str>) -> String {
    format!("'{}'", s.as_ref().replace('\'', r"'\''"))
}

pub(super) fn s(p: &Path) -> String {
    p.display().to_string()
}

impl Gate {
    pub(super) fn new() -> Gate {
        let env = TestEnv::new();
        let home = env.root.join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(home.join(".gitconfig"), USER_GITCONFIG).unwrap();
        let g = Gate {
            out: env.outside.clone(),
            origin: env.root.join("origin.git"),
            subsrc: env.root.join("subsrc"),
            home,
            env,
        };
        let (root, ws) = (&g.env.root, &g.env.ws);
        g.ok(root, &["init", "-q", "--bare", &s(&g.origin)]);
        g.ok(root, &["init", "-q", &s(&g.subsrc)]);
        g.ok(&g.subsrc, &["commit", "-q", "--allow-empty", "-m", "s1"]);
        g.ok(ws, &["init", "-q"]);
        std::fs::write(ws.join("f"), "a\n").unwrap();
        g.ok(ws, &["add", "f"]);
        g.ok(ws, &["commit", "-q", "-m", "init"]);
        g.ok(ws, &["remote", "add", "origin", &s(&g.origin)]);
        g.ok(ws, &["push", "-q", "-u", "origin", "main"]);
        g
    }

    /// The host's git in `dir`: a clean environment, the test's `HOME`, no system config.
    fn git(&self, dir: &Path) -> Command {
        host_git(&self.home, dir)
    }

    #[track_caller]
    pub(super) fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = output(self.git(dir).args(args));
        assert_status(&out, 0);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The shell command a payload runs: it leaves `tag` in the outside directory.
    pub(super) fn payload(&self, tag: &str) -> String {
        format!("touch {}", sq(s(&self.out.join(tag))))
    }

    /// The tags whose payload ran.
    pub(super) fn ran(&self) -> BTreeSet<String> {
        std::fs::read_dir(&self.out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    fn forget_ran(&self) {
        for tag in self.ran() {
            let _ = std::fs::remove_file(self.out.join(tag));
        }
    }

    /// Runs `script` in the workspace under `mode`, with the test's `HOME`, and a denial
    /// log.
    pub(super) fn sandboxed(&self, mode: &str, script: &str) -> (Output, Vec<serde_json::Value>) {
        let log = self.env.root.join(format!("denials-{mode}.ndjson"));
        let _ = std::fs::remove_file(&log);
        let mut cmd = self.env.sandgate(mode);
        cmd.env("HOME", &self.home)
            .arg("--denial-log")
            .arg(&log)
            .args(["--", "/bin/sh", "-c"])
            .arg(format!(
                "export GIT_CONFIG_NOSYSTEM=1 WS={}; cd \"$WS\" && {script}",
                sq(s(&self.env.ws))
            ));
        let out = output(&mut cmd);
        (out, sandbox_denials(&log))
    }

    /// Runs the attempts in one sandboxed call: each setup, then each attack, its output
    /// kept in `logs/TAG` in the workspace.
    fn attempt(&self, mode: &str, attempts: &[Attempt]) -> Run {
        let mut script = String::from("mkdir -p logs\n");
        for a in attempts {
            let log = format!("logs/{}", a.tag);
            script.push_str(&format!(
                "( set -e; {} ) >{log}.setup 2>&1 || echo 'setup-failed {}'\n",
                a.setup, a.tag
            ));
            script.push_str(&format!(
                "( {} ) >{log} 2>&1; echo \"attempt {} $?\"\n",
                a.act, a.tag
            ));
        }
        let (out, markers) = self.sandboxed(mode, &script);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut status = BTreeMap::new();
        let mut setup_failed = vec![];
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                ["attempt", tag, code] => {
                    status.insert(tag.to_owned(), code.parse().unwrap_or(-1));
                }
                ["setup-failed", tag] => setup_failed.push(tag.to_owned()),
                _ => {}
            }
        }
        Run {
            out,
            markers,
            status,
            setup_failed,
        }
    }

    /// What an attempt printed, for failure messages.
    fn log_of(&self, tag: &str) -> String {
        let read = |name: &str| std::fs::read_to_string(self.env.ws.join("logs").join(name));
        format!(
            "setup: {:?}; attack: {:?}",
            read(&format!("{tag}.setup")).unwrap_or_default().trim(),
            read(tag).unwrap_or_default().trim()
        )
    }

    /// Runs `trigger` with the host's git in `dir`.
    pub(super) fn trigger(&self, dir: &Path, trigger: Trigger) {
        match trigger {
            Trigger::Status => {
                // A tracked file whose stat no longer matches the index: `status` reads
                // it again, through any filter its attributes name.
                let _ = Command::new("touch")
                    .args(["-d", "@1000000000"])
                    .arg(dir.join("f"))
                    .status();
                let _ = output(self.git(dir).arg("status"));
            }
            Trigger::Log => {
                let mut log = self.git(dir);
                log.args(["log", "-1"]);
                self.in_pty(log);
            }
            Trigger::Alias => {
                let _ = output(self.git(dir).arg("st"));
            }
            Trigger::Commit => {
                let _ = output(
                    self.git(dir)
                        .args(["commit", "-q", "--allow-empty", "-m", "host"]),
                );
            }
        }
    }

    /// Runs `cmd` with a terminal as its stdin, stdout and stderr (git starts a pager only
    /// on one), neither `PAGER` nor `GIT_PAGER` set, and waits at most a minute.
    fn in_pty(&self, mut cmd: Command) {
        let size = nix::pty::Winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).unwrap_or_else(|e| panic!("openpty: {e}"));
        let slave = |fd: &std::os::fd::OwnedFd| Stdio::from(fd.try_clone().unwrap());
        cmd.env_remove("PAGER")
            .env_remove("GIT_PAGER")
            .stdin(slave(&pty.slave))
            .stdout(slave(&pty.slave))
            .stderr(slave(&pty.slave));
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let shown = format!("{cmd:?}");
        // The command holds copies of the terminal's slave side: closed with it.
        drop(cmd);
        drop(pty.slave);
        // Drained until every writer is gone (EIO), so the child never blocks on it.
        let mut master = std::fs::File::from(pty.master);
        let reader = std::thread::spawn(move || {
            let mut sink = vec![];
            let _ = master.read_to_end(&mut sink);
        });
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() < Duration::from_secs(60) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{shown} on a terminal did not end within a minute");
                }
            }
        }
        let _ = reader.join();
    }

    /// The control: under full-access every attempt lands, and the host's git, run by
    /// `host`, runs every payload.
    #[track_caller]
    fn control(&self, attempts: &[Attempt], host: &dyn Fn(&Gate)) {
        let run = self.attempt("full-access", attempts);
        assert!(run.setup_failed.is_empty(), "control: {}", show(&run.out));
        for a in attempts {
            assert_eq!(
                run.status.get(&a.tag),
                Some(&0),
                "control: {} failed under full-access: {}",
                a.tag,
                self.log_of(&a.tag)
            );
        }
        self.forget_ran();
        host(self);
        let ran = self.ran();
        let missing: Vec<&str> = attempts
            .iter()
            .map(|a| a.tag.as_str())
            .filter(|t| !ran.contains(*t))
            .collect();
        assert!(
            missing.is_empty(),
            "control: the host's git ran no payload after {missing:?} under full-access"
        );
        self.forget_ran();
    }

    /// The attack: under workspace-write every attempt's setup works, the attack is
    /// refused with a marker (or lands harmlessly, where allowed), and the host's git, run
    /// by `host`, runs no payload. Returns what went wrong.
    fn attack(&self, attempts: &[Attempt], host: &dyn Fn(&Gate)) -> Vec<String> {
        let run = self.attempt("workspace-write", attempts);
        let mut failures = vec![];
        for tag in &run.setup_failed {
            failures.push(format!(
                "{tag}: its setup failed inside: {}",
                self.log_of(tag)
            ));
        }
        for a in attempts {
            let Some(&code) = run.status.get(&a.tag) else {
                failures.push(format!("{}: never ran: {}", a.tag, show(&run.out)));
                continue;
            };
            if code == 0 && a.refused {
                failures.push(format!("{}: succeeded inside the sandbox", a.tag));
            }
            let marked = run.markers.iter().any(|m| {
                m["path"]
                    .as_str()
                    .is_some_and(|p| a.marked.iter().any(|dir| Path::new(p).starts_with(dir)))
            });
            if code != 0 && observing() && !marked {
                failures.push(format!(
                    "{}: refused without a marker under {:?}: {}",
                    a.tag,
                    a.marked,
                    self.log_of(&a.tag)
                ));
            }
        }
        self.forget_ran();
        host(self);
        for tag in self.ran() {
            failures.push(format!(
                "{tag}: the host's git ran the payload ({})",
                self.log_of(&tag)
            ));
        }
        failures
    }
}

// ---- Configuration planted in a repository made inside. ----

/// What a planted configuration makes git run.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Fsmonitor,
    Pager,
    Alias,
    Filter,
    Include,
    HooksPath,
}

const KINDS: [Kind; 6] = [
    Kind::Fsmonitor,
    Kind::Pager,
    Kind::Alias,
    Kind::Filter,
    Kind::Include,
    Kind::HooksPath,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Fsmonitor => "fsmonitor",
            Kind::Pager => "pager",
            Kind::Alias => "alias",
            Kind::Filter => "filter",
            Kind::Include => "include",
            Kind::HooksPath => "hookspath",
        }
    }

    /// The entry: its section header, its key as `git config` takes it, and its value,
    /// for the repository in `dir` (absolute).
    fn entry(self, g: &Gate, tag: &str, dir: &Path) -> (&'static str, &'static str, String) {
        let p = g.payload(tag);
        match self {
            Kind::Fsmonitor => ("[core]", "core.fsmonitor", format!("{p}; false")),
            Kind::Pager => ("[core]", "core.pager", format!("{p}; cat")),
            Kind::Alias => ("[alias]", "alias.st", format!("!{p}")),
            Kind::Filter => ("[filter \"x\"]", "filter.x.clean", format!("{p}; cat")),
            Kind::Include => ("[include]", "include.path", s(&dir.join(".git/extra.cfg"))),
            Kind::HooksPath => ("[core]", "core.hooksPath", s(&dir.join("myhooks"))),
        }
    }

    /// Files the attack needs besides the entry (made inside, before it), using the
    /// host-made payload files `p/TAG.*`.
    fn setup(self, rel: &str, tag: &str) -> String {
        match self {
            Kind::Filter => format!("echo '* filter=x' > {rel}/.gitattributes"),
            Kind::Include => format!("cp p/{tag}.extra {rel}/.git/extra.cfg"),
            Kind::HooksPath => {
                format!("mkdir {rel}/myhooks && cp -p p/{tag}.hook {rel}/myhooks/pre-commit")
            }
            Kind::Fsmonitor | Kind::Pager | Kind::Alias => "true".into(),
        }
    }

    fn trigger(self) -> Trigger {
        match self {
            Kind::Fsmonitor | Kind::Filter | Kind::Include => Trigger::Status,
            Kind::Pager => Trigger::Log,
            Kind::Alias => Trigger::Alias,
            Kind::HooksPath => Trigger::Commit,
        }
    }
}

/// How the bytes reach `.git/config`.
#[derive(Debug, Clone, Copy)]
enum Door {
    GitConfig,
    Redirect,
    LockRename,
    Cp,
    Symlink,
    Hardlink,
    DirRename,
    TmpDir,
    TmpfileLink,
    ProcFd,
}

const DOORS: [Door; 10] = [
    Door::GitConfig,
    Door::Redirect,
    Door::LockRename,
    Door::Cp,
    Door::Symlink,
    Door::Hardlink,
    Door::DirRename,
    Door::TmpDir,
    Door::TmpfileLink,
    Door::ProcFd,
];

/// The doors through which content is *validated* (a rename or a link of a file made
/// elsewhere) rather than refused by name: every kind of entry goes through these.
const VALIDATED: [Door; 4] = [
    Door::GitConfig,
    Door::LockRename,
    Door::Hardlink,
    Door::TmpfileLink,
];

/// `O_TMPFILE` in `argv[1]`, written with `argv[2]`'s content and mode `argv[3]`, then
/// linked as `argv[4]` (an existing file there removed first) through `/proc/self/fd`
/// with `linkat(AT_SYMLINK_FOLLOW)` (python's `os.link` calls `link`, which does not
/// follow the magic link).
const TMPFILE_LINK: &str = "import ctypes,os,sys; d,src,mode,dst=sys.argv[1:]; \
fd=os.open(d,os.O_TMPFILE|os.O_WRONLY,int(mode,8)); os.write(fd,open(src,'rb').read()); \
os.path.lexists(dst) and os.unlink(dst); libc=ctypes.CDLL(None,use_errno=True); \
r=libc.linkat(-100,b'/proc/self/fd/%d'%fd,-100,dst.encode(),0x400); \
r==0 or sys.exit(os.strerror(ctypes.get_errno()))";

impl Door {
    fn name(self) -> &'static str {
        match self {
            Door::GitConfig => "git-config",
            Door::Redirect => "redirect",
            Door::LockRename => "lock-rename",
            Door::Cp => "cp",
            Door::Symlink => "symlink",
            Door::Hardlink => "hardlink",
            Door::DirRename => "dir-rename",
            Door::TmpDir => "tmp-dir",
            Door::TmpfileLink => "tmpfile-link",
            Door::ProcFd => "proc-fd",
        }
    }

    /// The attack on the repository at `rel` (relative to the workspace), with `cfg` the
    /// whole new configuration (a host-made file in the workspace) and `key`/`value` the
    /// entry, and the places outside `rel` where a refusal may be marked.
    fn act(self, rel: &str, cfg: &str, key: &str, value: &str, tmp: &str) -> (String, Vec<String>) {
        let git = format!("{rel}/.git");
        let copy_repo =
            |to: &str| format!("cp -R {git}/objects {git}/refs {git}/HEAD {git}/index {to}/");
        let act = match self {
            Door::GitConfig => format!("git -C {rel} config {key} {}", sq(value)),
            Door::Redirect => format!("cat {cfg} > {git}/config"),
            Door::LockRename => {
                format!("cat {cfg} > {git}/config.lock && mv -f {git}/config.lock {git}/config")
            }
            Door::Cp => format!("cp {cfg} {git}/config"),
            Door::Symlink => format!("ln -sf \"$WS/{cfg}\" {git}/config"),
            Door::Hardlink => format!("ln -f {cfg} {git}/config"),
            Door::DirRename => format!(
                "mkdir {rel}/g && {} && cat {cfg} > {rel}/g/config && rm -rf {git} && mv {rel}/g {git}",
                copy_repo(&format!("{rel}/g"))
            ),
            Door::TmpDir => format!(
                "rm -rf {tmp} && mkdir {tmp} && {} && cat {cfg} > {tmp}/config && rm -rf {git} && mv {tmp} {git}",
                copy_repo(tmp)
            ),
            Door::TmpfileLink => format!(
                "/usr/bin/python3 -c {} {git} {cfg} 644 {git}/config",
                sq(TMPFILE_LINK)
            ),
            Door::ProcFd => format!("exec 3< {git}/config && cat {cfg} > /proc/self/fd/3"),
        };
        let elsewhere = match self {
            Door::TmpDir => vec![tmp.to_owned()],
            _ => vec![],
        };
        (act, elsewhere)
    }
}

/// The base of every configuration written whole: what `git clone` writes, less the
/// remote.
const BASE_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\
\tbare = false\n\tlogallrefupdates = true\n";

/// The attempts planting `kind` through `door`, each in its own clone of `origin.git`
/// made inside under `dir/`.
fn planted_config(g: &Gate, dir: &str, kinds_and_doors: &[(Kind, Door)]) -> Vec<Attempt> {
    let salt = g
        .env
        .root
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    kinds_and_doors
        .iter()
        .map(|&(kind, door)| {
            let tag = format!("{}-{}", kind.name(), door.name());
            let rel = format!("{dir}/{tag}");
            let abs = g.env.ws.join(&rel);
            let (header, key, value) = kind.entry(g, &tag, &abs);
            let field = key.rsplit('.').next().unwrap_or(key);
            let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
            g.env.put(
                &format!("p/{tag}.cfg"),
                &format!("{BASE_CONFIG}{header}\n\t{field} = \"{escaped}\"\n"),
                0o644,
            );
            g.env.put(
                &format!("p/{tag}.extra"),
                &format!("[core]\n\tfsmonitor = \"{}; false\"\n", g.payload(&tag)),
                0o644,
            );
            g.env.put(
                &format!("p/{tag}.hook"),
                &format!("#!/bin/sh\n{}\n", g.payload(&tag)),
                0o755,
            );
            let tmp = format!("/tmp/{salt}-{tag}");
            let (act, elsewhere) = door.act(&rel, &format!("p/{tag}.cfg"), key, &value, &tmp);
            let mut marked = vec![abs];
            marked.extend(elsewhere.into_iter().map(PathBuf::from));
            Attempt {
                setup: format!(
                    "git clone -q {} {rel} && {}",
                    sq(s(&g.origin)),
                    kind.setup(&rel, &tag)
                ),
                act,
                tag,
                marked,
                refused: true,
            }
        })
        .collect()
}

/// Runs each kind's trigger (and `git status`) in each attempt's repository.
fn host_runs_git_in(g: &Gate, dir: &str, kinds_and_doors: &[(Kind, Door)]) {
    for &(kind, door) in kinds_and_doors {
        let repo = g
            .env
            .ws
            .join(dir)
            .join(format!("{}-{}", kind.name(), door.name()));
        for trigger in [Trigger::Status, kind.trigger()] {
            g.trigger(&repo, trigger);
        }
    }
}

#[test]
fn a_repository_made_inside_and_recorded_as_a_gitlink_runs_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let attempts = |g: &Gate| {
        vec![Attempt {
            tag: "gitlink".into(),
            setup: "git init -q evil && git -C evil commit -q --allow-empty -m e".into(),
            act: format!(
                "git -C evil config core.fsmonitor {}; rc=$?; git add evil && git commit -q -m evil && exit $rc",
                sq(format!("{}; false", g.payload("gitlink")))
            ),
            marked: vec![g.env.ws.join("evil")],
            refused: true,
        }]
    };
    let host = |g: &Gate| {
        g.trigger(&g.env.ws, Trigger::Status);
        g.trigger(&g.env.ws.join("evil"), Trigger::Status);
    };
    let g = Gate::new();
    g.control(&attempts(&g), &host);
    let g = Gate::new();
    let failures = g.attack(&attempts(&g), &host);
    // The gitlink itself is recorded: only the configuration was refused.
    let tree = g.ok(&g.env.ws, &["ls-tree", "HEAD", "evil"]);
    assert!(tree.starts_with("160000 commit "), "{tree}");
    assert_none(failures);
}

#[test]
fn a_config_planted_in_a_repository_made_inside_runs_nothing() {
    if !require_full_enforcement() {
        return;
    }
    // Every door with one payload; every payload through the doors where the content
    // itself is validated.
    let mut plan: Vec<(Kind, Door)> = DOORS.iter().map(|&d| (Kind::Fsmonitor, d)).collect();
    for kind in &KINDS[1..] {
        plan.extend(VALIDATED.iter().map(|&d| (*kind, d)));
    }
    let host = |g: &Gate| host_runs_git_in(g, "v", &plan);
    let g = Gate::new();
    g.control(&planted_config(&g, "v", &plan), &host);
    let g = Gate::new();
    assert_none(g.attack(&planted_config(&g, "v", &plan), &host));
}

#[test]
fn a_git_directory_planted_in_a_registered_submodule_runs_nothing() {
    if !require_full_enforcement() {
        return;
    }
    // Two submodules registered on the host, then deinitialised: their checkouts are
    // empty directories the host's `git status` enters once they hold a `.git`.
    let prepare = || {
        let g = Gate::new();
        let ws = g.env.ws.clone();
        for sub in ["s1", "s2"] {
            g.ok(&ws, &["submodule", "add", "-q", &s(&g.subsrc), sub]);
        }
        g.ok(&ws, &["commit", "-q", "-m", "subs"]);
        g.ok(&ws, &["submodule", "deinit", "-q", "-f", "--all"]);
        std::fs::remove_dir_all(ws.join(".git/modules")).unwrap();
        let cfg = format!(
            "{BASE_CONFIG}[core]\n\tfsmonitor = \"{}; false\"\n",
            g.payload("sub-by-hand")
        );
        g.env.put("p/sub-by-hand.cfg", &cfg, 0o644);
        let attempts = [
            Attempt {
                tag: "sub-git-init".into(),
                setup: "git init -q s1".into(),
                act: format!(
                    "git -C s1 config core.fsmonitor {}",
                    sq(format!("{}; false", g.payload("sub-git-init")))
                ),
                marked: vec![ws.join("s1")],
                refused: true,
            },
            Attempt {
                tag: "sub-by-hand".into(),
                setup: "mkdir -p s2/.git/objects s2/.git/refs/heads && echo 'ref: refs/heads/main' > s2/.git/HEAD".into(),
                act: "cp p/sub-by-hand.cfg s2/.git/config".into(),
                marked: vec![ws.join("s2")],
                refused: true,
            },
        ];
        (g, attempts)
    };
    let host = |g: &Gate| {
        g.trigger(&g.env.ws, Trigger::Status);
        g.trigger(&g.env.ws.join("s1"), Trigger::Status);
        g.trigger(&g.env.ws.join("s2"), Trigger::Status);
    };
    let (g, attempts) = prepare();
    g.control(&attempts, &host);
    let (g, attempts) = prepare();
    assert_none(g.attack(&attempts, &host));
}

// ---- Hooks planted in a repository made inside. ----

/// How an executable `pre-commit` reaches `.git/hooks`.
const HOOK_DOORS: [&str; 10] = [
    "create-0755",
    "chmod",
    "rename",
    "cp-p",
    "symlink",
    "hardlink",
    "dir-rename",
    "fchmod",
    "tmpfile-link",
    "acl",
];

fn planted_hooks(g: &Gate) -> Vec<Attempt> {
    HOOK_DOORS
        .iter()
        .map(|door| {
            let tag = format!("hook-{door}");
            let rel = format!("h/{door}");
            let hook = format!("{rel}/.git/hooks/pre-commit");
            let (exe, txt) = (format!("p/{tag}.hook"), format!("p/{tag}.txt"));
            let script = format!("#!/bin/sh\n{}\n", g.payload(&tag));
            g.env.put(&exe, &script, 0o755);
            g.env.put(&txt, &script, 0o644);
            let py = |code: &str| format!("/usr/bin/python3 -c {} {hook} {txt}", sq(code));
            let act = match *door {
                "create-0755" => py(
                    "import os,sys; fd=os.open(sys.argv[1],os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o755); os.write(fd,open(sys.argv[2],'rb').read())",
                ),
                "chmod" => format!("cat {txt} > {hook} && chmod +x {hook}"),
                "rename" => format!("cp {txt} {rel}/x && chmod 755 {rel}/x && mv {rel}/x {hook}"),
                "cp-p" => format!("cp -p {exe} {hook}"),
                "symlink" => format!("ln -s \"$WS/{exe}\" {hook}"),
                "hardlink" => format!("ln {exe} {hook}"),
                "dir-rename" => format!(
                    "mkdir {rel}/nh && cp -p {exe} {rel}/nh/pre-commit && rm -rf {rel}/.git/hooks && mv {rel}/nh {rel}/.git/hooks"
                ),
                "fchmod" => py(
                    "import os,sys; fd=os.open(sys.argv[1],os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o644); os.write(fd,open(sys.argv[2],'rb').read()); os.fchmod(fd,0o755)",
                ),
                "tmpfile-link" => format!(
                    "/usr/bin/python3 -c {} {rel}/.git/hooks {txt} 755 {hook}",
                    sq(TMPFILE_LINK)
                ),
                _ => format!("cat {txt} > {hook} && setfacl -m u::rwx,g::rx,o::rx {hook}"),
            };
            Attempt {
                setup: format!("git clone -q {} {rel}", sq(s(&g.origin))),
                act,
                marked: vec![g.env.ws.join(&rel)],
                // A file created in `hooks` may land, without its execute bits.
                refused: false,
                tag,
            }
        })
        .collect()
}

#[test]
fn a_hook_planted_in_a_repository_made_inside_never_runs() {
    if !require_full_enforcement() {
        return;
    }
    let acl = Command::new("setfacl").arg("--version").output().is_ok();
    if !require("setfacl", acl) {
        return;
    }
    let host = |g: &Gate| {
        for door in HOOK_DOORS {
            g.trigger(&g.env.ws.join("h").join(door), Trigger::Commit);
        }
    };
    let g = Gate::new();
    g.control(&planted_hooks(&g), &host);
    let g = Gate::new();
    let mut failures = g.attack(&planted_hooks(&g), &host);
    // Whatever landed is no executable hook: git runs a hook only when it is one.
    for door in HOOK_DOORS {
        let hook = g.env.ws.join("h").join(door).join(".git/hooks/pre-commit");
        if let Ok(meta) = std::fs::metadata(&hook) {
            if meta.permissions().mode() & 0o111 != 0 {
                failures.push(format!("hook-{door}: {} is executable", hook.display()));
            }
        }
    }
    assert_none(failures);
}

// ---- Another repository made on the host, edited in place. ----

#[test]
fn another_repository_in_the_workspace_cannot_be_edited_in_place() {
    if !require_full_enforcement() {
        return;
    }
    const EDITS: [&str; 3] = ["append", "sed", "python"];
    let prepare = || {
        let g = Gate::new();
        let mut attempts = vec![];
        for edit in EDITS {
            // A second clone beside the workspace's own repository, with a hook the
            // user installed.
            let rel = format!("second-{edit}");
            let repo = g.env.ws.join(&rel);
            g.ok(&g.env.ws, &["clone", "-q", &s(&g.origin), &rel]);
            let hook = repo.join(".git/hooks/pre-commit");
            std::fs::write(&hook, "#!/bin/sh\ntrue\n").unwrap();
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
            let (cfg_tag, hook_tag) = (format!("cfg-{edit}"), format!("hook-{edit}"));
            let cfg_text = format!("[core]\n\tfsmonitor = \"{}; false\"\n", g.payload(&cfg_tag));
            g.env.put(&format!("p/{cfg_tag}"), &cfg_text, 0o644);
            g.env.put(
                &format!("p/{hook_tag}"),
                &format!("{}\n", g.payload(&hook_tag)),
                0o644,
            );
            for (tag, target) in [
                (cfg_tag, format!("{rel}/.git/config")),
                (hook_tag, format!("{rel}/.git/hooks/pre-commit")),
            ] {
                let act = match edit {
                    "append" => format!("cat p/{tag} >> {target}"),
                    "sed" => format!("sed -i \"\\$r $WS/p/{tag}\" {target}"),
                    _ => format!(
                        "/usr/bin/python3 -c {} {target} p/{tag}",
                        sq("import sys; open(sys.argv[1],'a').write(open(sys.argv[2]).read())")
                    ),
                };
                attempts.push(Attempt {
                    tag,
                    setup: "true".into(),
                    act,
                    marked: vec![repo.clone()],
                    // An edited hook may land, without its execute bits.
                    refused: target.ends_with("config"),
                });
            }
        }
        (g, attempts)
    };
    let host = |g: &Gate| {
        for edit in EDITS {
            let repo = g.env.ws.join(format!("second-{edit}"));
            g.trigger(&repo, Trigger::Status);
            g.trigger(&repo, Trigger::Commit);
        }
    };
    let (g, attempts) = prepare();
    g.control(&attempts, &host);
    let (g, attempts) = prepare();
    assert_none(g.attack(&attempts, &host));
}

// ---- sandgate's project configuration. ----

/// Ways to make `DIR/.sandgate/config.json` narrow every later call to read-only.
const PROJECT_DOORS: [&str; 4] = ["mkdir", "mkdir-p", "rename", "symlink"];

fn plant_project_config(door: &str, dir: &str) -> String {
    let json = r#"{"sandbox": "read-only"}"#;
    let target = format!("{dir}/.sandgate");
    match door {
        "mkdir" => format!("mkdir {target} && echo '{json}' > {target}/config.json"),
        "mkdir-p" => format!("mkdir -p {target}/x && echo '{json}' > {target}/config.json"),
        "rename" => format!("mkdir {dir}/pc && echo '{json}' > {dir}/pc/config.json && mv {dir}/pc {target}"),
        _ => format!("mkdir {dir}/pc && echo '{json}' > {dir}/pc/config.json && ln -s \"$WS/{dir}/pc\" {target}"),
    }
}

/// Whether a call in `workspace` still writes (is not narrowed to read-only).
fn not_narrowed(g: &Gate, workspace: &Path) -> Result<(), String> {
    let mut cmd = g.env.sandgate_without_workspace("workspace-write");
    cmd.arg("--workspace")
        .arg(workspace)
        .current_dir(workspace)
        .args(["--", "/bin/sh", "-c", "echo x > narrowed-probe"]);
    let out = output(&mut cmd);
    match out.status.code() {
        Some(0) => Ok(()),
        _ => Err(format!(
            "the next call in {} was narrowed: {}",
            workspace.display(),
            show(&out)
        )),
    }
}

/// What went wrong when `door` tried to plant `workspace/.sandgate` (`landed`: the
/// command succeeded): it must be refused with a marker, leave nothing, and leave the next
/// call in `workspace` as wide as it was.
fn project_config_failures(
    g: &Gate,
    door: &str,
    workspace: &Path,
    landed: bool,
    markers: &[serde_json::Value],
) -> Vec<String> {
    let dot = workspace.join(".sandgate");
    let mut failures = vec![];
    if landed {
        failures.push(format!("{door}: succeeded inside the sandbox"));
    }
    let marked = markers.iter().any(|m| {
        m["path"]
            .as_str()
            .is_some_and(|p| Path::new(p).starts_with(workspace) && p.contains(".sandgate"))
    });
    if observing() && !marked {
        failures.push(format!("{door}: no marker names {}", dot.display()));
    }
    if std::fs::symlink_metadata(&dot).is_ok() {
        failures.push(format!("{door}: {} exists", dot.display()));
    }
    if let Err(e) = not_narrowed(g, workspace) {
        failures.push(format!("{door}: {e}"));
    }
    failures
}

#[test]
fn project_configuration_cannot_be_created_in_the_workspace() {
    if !require_full_enforcement() {
        return;
    }
    let g = Gate::new();
    let mut failures = vec![];
    for door in PROJECT_DOORS {
        let (out, markers) = g.sandboxed("workspace-write", &plant_project_config(door, "."));
        let landed = out.status.code() == Some(0);
        failures.extend(project_config_failures(
            &g, door, &g.env.ws, landed, &markers,
        ));
        // A landed attempt is undone, so that the next one starts as this one did.
        let dot = g.env.ws.join(".sandgate");
        let _ = std::fs::remove_dir_all(&dot).or_else(|_| std::fs::remove_file(&dot));
        let _ = std::fs::remove_dir_all(g.env.ws.join("pc"));
    }
    assert_none(failures);
}

#[test]
fn project_configuration_cannot_be_created_for_a_later_workspace_below() {
    if !require_full_enforcement() {
        return;
    }
    let g = Gate::new();
    let script: Vec<String> = PROJECT_DOORS
        .iter()
        .map(|door| {
            format!(
                "mkdir sub-{door} && ( {} ); echo \"attempt {door} $?\"",
                plant_project_config(door, &format!("sub-{door}"))
            )
        })
        .collect();
    let (out, markers) = g.sandboxed("workspace-write", &script.join("\n"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut failures = vec![];
    for door in PROJECT_DOORS {
        let landed = stdout.lines().any(|l| l == format!("attempt {door} 0"));
        let sub = g.env.ws.join(format!("sub-{door}"));
        failures.extend(project_config_failures(&g, door, &sub, landed, &markers));
    }
    assert_none(failures);
}
