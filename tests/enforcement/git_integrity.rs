//! Git metadata integrity: nothing a command writes under workspace-write changes which
//! configuration or hooks the host's git later uses for a repository that existed when the
//! call started — not through `commondir`, `config.worktree`, existing linked worktrees,
//! submodule git dirs, `info/`, a `core.hooksPath`, an included config file or a script the
//! configuration names as a program in the workspace; not by a symlink, a hardlink, a rename into place or a relative path; not by
//! racing the check. Each attack is followed by the real host git (status, log, commit,
//! fetch, submodule status), whose planted payload would leave a file outside the workspace.
//! Ordinary git work inside the sandbox keeps working.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

/// A repository in the workspace with a local `origin`, a submodule `sub` cloned from a
/// local repository, and a linked worktree outside the workspace, all made by the host git.
struct Fx {
    env: TestEnv,
    home: PathBuf,
    /// Created by every planted payload; outside the workspace.
    marker: PathBuf,
    linked: PathBuf,
    subsrc: PathBuf,
}

const ID: [&str; 6] = [
    "-c",
    "user.name=t",
    "-c",
    "user.email=t@example.com",
    "-c",
    "init.defaultBranch=main",
];

/// The names at the top of a git directory that decide what git runs.
/// (Of `info/` only `attributes` names a command; git itself writes the rest.)
const SENSITIVE: [&str; 6] = [
    "config",
    "config.worktree",
    "commondir",
    "hooks",
    "info/attributes",
    "gitdir",
];

impl Fx {
    fn new() -> Fx {
        let env = TestEnv::new();
        let (home, linked, subsrc) = (
            env.root.join("home"),
            env.root.join("linked"),
            env.root.join("subsrc"),
        );
        std::fs::create_dir(&home).unwrap();
        let marker = env.outside.join("payload-ran");
        let fx = Fx {
            env,
            home,
            marker,
            linked,
            subsrc,
        };
        let (root, ws) = (&fx.env.root, &fx.env.ws);
        let origin = root.join("origin.git");
        fx.ok(root, &["init", "-q", "--bare", &s(&origin)]);
        fx.ok(root, &["init", "-q", &s(&fx.subsrc)]);
        fx.ok(&fx.subsrc, &["commit", "-q", "--allow-empty", "-m", "s1"]);
        fx.ok(ws, &["init", "-q"]);
        std::fs::write(ws.join("f"), "a\n").unwrap();
        fx.ok(ws, &["add", "f"]);
        fx.ok(ws, &["commit", "-q", "-m", "init"]);
        fx.ok(ws, &["remote", "add", "origin", &s(&origin)]);
        fx.ok(ws, &["push", "-q", "origin", "main"]);
        fx.ok(
            ws,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                &s(&fx.subsrc),
                "sub",
            ],
        );
        fx.ok(ws, &["commit", "-q", "-m", "sub"]);
        fx.ok(
            ws,
            &["worktree", "add", "-q", "-b", "linked", &s(&fx.linked)],
        );
        fx
    }

    /// The host git in `dir`, with this test's HOME and no system config.
    fn git(&self, dir: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new("git");
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(&key);
            }
        }
        cmd.current_dir(dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(ID)
            .args(args);
        output(&mut cmd)
    }

    #[track_caller]
    fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git(dir, args);
        assert_status(&out, 0);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes a host-made file into the workspace (a payload the sandboxed command uses).
    fn put(&self, rel: &str, text: &str, exec: bool) {
        self.env.put(rel, text, if exec { 0o755 } else { 0o644 });
    }

    /// A config section that makes git run the payload on `status`.
    fn fsmonitor(&self) -> String {
        format!(
            "[core]\n\tfsmonitor = \"touch {}; false\"\n",
            self.marker.display()
        )
    }

    /// A hook script that runs the payload.
    fn hook(&self) -> String {
        format!("#!/bin/sh\ntouch {}\n", self.marker.display())
    }

    /// Runs `script` in the workspace under `mode`, with the same HOME as the host git
    /// (sandgate reads the user's git configuration there).
    fn sandboxed(&self, mode: &str, script: &str) -> Output {
        let mut cmd = self.env.sandgate(mode);
        cmd.env("HOME", &self.home).args([
            "--",
            "/bin/sh",
            "-c",
            &format!(
                "export GIT_CONFIG_NOSYSTEM=1 WS='{}'; cd \"$WS\" && {script}",
                self.env.ws.display()
            ),
        ]);
        output(&mut cmd)
    }

    /// Every sensitive entry of every git directory the fixture has (recursively, links as
    /// their targets), the submodule's `.git` file, and `extra` paths.
    fn snapshot(&self, extra: &[PathBuf]) -> Vec<(String, String)> {
        let git = self.env.ws.join(".git");
        let mut roots = vec![self.env.ws.join("sub/.git")];
        for dir in [
            git.clone(),
            git.join("modules/sub"),
            git.join("worktrees/linked"),
        ] {
            roots.extend(SENSITIVE.iter().map(|n| dir.join(n)));
        }
        roots.extend(extra.iter().cloned());
        let mut out = vec![];
        while let Some(path) = roots.pop() {
            let shown = path.display().to_string();
            match std::fs::symlink_metadata(&path) {
                Err(_) => out.push((shown, "absent".into())),
                Ok(m) if m.file_type().is_symlink() => out.push((
                    shown,
                    format!("link to {:?}", std::fs::read_link(&path).ok()),
                )),
                Ok(m) if m.is_dir() => {
                    out.push((shown, "dir".into()));
                    for entry in std::fs::read_dir(&path).unwrap().flatten() {
                        roots.push(entry.path());
                    }
                }
                Ok(m) => out.push((
                    shown,
                    format!(
                        "{:o} {}",
                        {
                            use std::os::unix::fs::PermissionsExt;
                            m.permissions().mode()
                        },
                        String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default())
                    ),
                )),
            }
        }
        out.sort();
        out
    }

    /// Runs the host git commands a user runs next in `dir`; returns what went wrong.
    fn host_checks(&self, dir: &Path) -> Vec<String> {
        // A tracked file whose stat no longer matches the index: `status` must read it,
        // through any filter an attributes file names.
        let _ = Command::new("touch")
            .args(["-d", "@1000000000"])
            .arg(self.env.ws.join("f"))
            .status();
        let mut problems = vec![];
        for args in [
            &["status"][..],
            &["log", "-1"],
            &["commit", "-q", "--allow-empty", "-m", "x"],
            &["fetch", "-q", "origin"],
            &["submodule", "status"],
        ] {
            let out = self.git(dir, args);
            if out.status.code() != Some(0) {
                problems.push(format!(
                    "host `git {}` in {} failed: {}",
                    args.join(" "),
                    dir.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        if self.marker.exists() {
            problems.push(format!("the host git in {} ran the payload", dir.display()));
        }
        problems
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// One planted file: how the host prepares the repository, what the sandboxed command
/// writes where, and whether the host git runs the payload once it lands.
struct Plant<'a> {
    what: &'a str,
    /// Host-side preparation on a fresh fixture.
    setup: &'a dyn Fn(&Fx),
    /// Sandboxed commands run first (building a crafted directory, say); allowed.
    prelude: &'a str,
    /// The sensitive path, relative to the workspace.
    target: &'a str,
    /// The payload file the host puts in the workspace, and its text.
    payload: &'a dyn Fn(&Fx) -> String,
    exec: bool,
    /// The host git runs the payload when the plant lands (else: it must not land).
    executes: bool,
    /// Where the host git runs afterwards, besides the workspace.
    also_in: &'a dyn Fn(&Fx) -> Vec<PathBuf>,
    /// Extra paths whose content must not change.
    extra: &'a dyn Fn(&Fx) -> Vec<PathBuf>,
}

fn nothing(_: &Fx) {}
fn no_paths(_: &Fx) -> Vec<PathBuf> {
    vec![]
}

/// Ways to put the payload `p` at `target`: written directly, by a relative path from its
/// directory, through a symlink made elsewhere in the workspace, as a symlink planted at
/// the name, as a hardlink, and by a rename into place.
fn variants(target: &str, exec: bool) -> Vec<String> {
    let (dir, name) = target.rsplit_once('/').unwrap_or((".", target));
    let x = |p: &str| {
        if exec {
            format!(" && chmod +x {p}")
        } else {
            String::new()
        }
    };
    vec![
        format!("cat p > {target}{}", x(target)),
        format!("cd {dir} && cat \"$WS/p\" > {name}{}", x(name)),
        format!("ln -s \"$WS/{target}\" lnk && cat p > lnk{}", x("lnk")),
        format!("ln -sfn \"$WS/p\" {target}"),
        format!("ln -f p {target}"),
        format!("cp -p p tmp && mv -f tmp {target}"),
    ]
}

/// Runs each way of planting each of `plants` in a fresh fixture and returns the failures.
/// The direct way also runs under full-access first, as the control that the plant is a
/// real attack (it lands, and the host git runs the payload when `executes`).
fn attack(plants: &[Plant]) -> Vec<String> {
    let mut failures = vec![];
    for plant in plants {
        let scripts = variants(plant.target, plant.exec);
        let prepare = || {
            let fx = Fx::new();
            (plant.setup)(&fx);
            fx.put("p", &(plant.payload)(&fx), plant.exec);
            fx
        };
        let dirs = |fx: &Fx| {
            let mut dirs = vec![fx.env.ws.clone()];
            dirs.extend((plant.also_in)(fx));
            dirs
        };
        // Control.
        let fx = prepare();
        let before = fx.snapshot(&(plant.extra)(&fx));
        let script = format!("{}{}", plant.prelude, scripts[0]);
        let out = fx.sandboxed("full-access", &script);
        assert_status(&out, 0);
        assert_ne!(
            fx.snapshot(&(plant.extra)(&fx)),
            before,
            "control: `{script}` ({}) changed nothing under full-access",
            plant.what
        );
        if plant.executes {
            let problems: Vec<_> = dirs(&fx).iter().flat_map(|d| fx.host_checks(d)).collect();
            assert!(
                fx.marker.exists(),
                "control: after `{script}` ({}) under full-access the host git ran nothing: {problems:?}",
                plant.what
            );
        }
        // A fixture the last attempt left intact serves the next one (after removing the
        // attempt's own scratch files); one it changed is replaced.
        let mut fx = prepare();
        for script in &scripts {
            for scratch in ["lnk", "tmp", ".git/c", ".git/evilsub"] {
                let path = fx.env.ws.join(scratch);
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            }
            let before = fx.snapshot(&(plant.extra)(&fx));
            let script = format!("{}{script}", plant.prelude);
            let out = fx.sandboxed("workspace-write", &script);
            let label = format!("{} by `{script}`", plant.what);
            let failed_before = failures.len();
            if out.status.code() == Some(0) {
                failures.push(format!("{label}: succeeded inside the sandbox"));
            }
            if fx.snapshot(&(plant.extra)(&fx)) != before {
                failures.push(format!("{label}: changed protected git metadata"));
            }
            for dir in dirs(&fx) {
                for problem in fx.host_checks(&dir) {
                    failures.push(format!("{label}: {problem}"));
                }
            }
            if failures.len() != failed_before {
                fx = prepare();
            }
        }
    }
    failures
}

/// A common dir made in `.git/c` that shares the real objects and refs but has its own
/// config: pointing `commondir` at it makes git use that config instead of `.git/config`.
const CRAFTED_COMMON: &str = "mkdir .git/c && ln -s ../objects .git/c/objects && ln -s ../refs .git/c/refs && cp p-config .git/c/config && ";

fn crafted_common_config(fx: &Fx) {
    fx.put(
        "p-config",
        &format!(
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = \"touch {}; false\"\n",
            fx.marker.display()
        ),
        false,
    );
}

fn worktree_config_on(fx: &Fx) {
    fx.ok(&fx.env.ws, &["config", "extensions.worktreeConfig", "true"]);
}

#[test]
fn a_planted_commondir_runs_nothing_on_the_host() {
    if !require_full_enforcement() {
        return;
    }
    assert_none(attack(&[Plant {
        what: ".git/commondir to a crafted common dir",
        setup: &crafted_common_config,
        prelude: CRAFTED_COMMON,
        target: ".git/commondir",
        payload: &|_| "c\n".into(),
        exec: false,
        executes: true,
        also_in: &no_paths,
        extra: &no_paths,
    }]));
}

#[test]
fn a_planted_or_edited_config_worktree_runs_nothing_on_the_host() {
    if !require_full_enforcement() {
        return;
    }
    let fsmonitor = |fx: &Fx| fx.fsmonitor();
    assert_none(attack(&[
        Plant {
            what: ".git/config.worktree without extensions.worktreeConfig",
            setup: &nothing,
            prelude: "",
            target: ".git/config.worktree",
            payload: &fsmonitor,
            exec: false,
            executes: false,
            also_in: &no_paths,
            extra: &no_paths,
        },
        Plant {
            what: ".git/config.worktree with extensions.worktreeConfig",
            setup: &worktree_config_on,
            prelude: "",
            target: ".git/config.worktree",
            payload: &fsmonitor,
            exec: false,
            executes: true,
            also_in: &no_paths,
            extra: &no_paths,
        },
        Plant {
            what: "an existing .git/config.worktree edited",
            setup: &|fx| {
                worktree_config_on(fx);
                fx.ok(&fx.env.ws, &["config", "--worktree", "user.note", "kept"]);
            },
            prelude: "",
            target: ".git/config.worktree",
            payload: &|fx| format!("[user]\n\tnote = kept\n{}", fx.fsmonitor()),
            exec: false,
            executes: true,
            also_in: &no_paths,
            extra: &no_paths,
        },
    ]));
}

#[test]
fn a_new_worktree_entry_leaves_the_main_repository_alone() {
    if !require_full_enforcement() {
        return;
    }
    // A worktree that does not exist at the start belongs to the sandbox (`git worktree
    // add` must work), but the main repository must not pick anything up from it, and its
    // own configuration names no program either.
    let fx = Fx::new();
    worktree_config_on(&fx);
    fx.put("p", &fx.fsmonitor(), false);
    let before = fx.snapshot(&[]);
    let out = fx.sandboxed(
        "workspace-write",
        "mkdir -p .git/worktrees/evil && echo ../.. > .git/worktrees/evil/commondir \
         && echo \"$WS/evil/.git\" > .git/worktrees/evil/gitdir \
         && git rev-parse HEAD > .git/worktrees/evil/HEAD",
    );
    assert_status(&out, 0);
    // Written in place (the entry is a guarded git directory by now: its metadata), or
    // renamed into place (checked as configuration: it names a program).
    for (plant, op) in [
        ("cp p .git/worktrees/evil/config.worktree", "git_metadata"),
        (
            "cp p tmp && mv tmp .git/worktrees/evil/config.worktree",
            "git_config",
        ),
    ] {
        let out = fx.sandboxed("workspace-write", plant);
        assert_command_failed(&out);
        if observing() {
            assert!(
                stderr_markers(&out).iter().any(|m| m["op"] == op),
                "{plant}: {}",
                show(&out)
            );
        }
    }
    assert!(!fx
        .env
        .ws
        .join(".git/worktrees/evil/config.worktree")
        .exists());
    assert_eq!(fx.snapshot(&[]), before);
    assert_none(fx.host_checks(&fx.env.ws));
}

#[test]
fn an_existing_linked_worktree_cannot_be_redirected() {
    if !require_full_enforcement() {
        return;
    }
    let linked = |fx: &Fx| vec![fx.linked.clone()];
    assert_none(attack(&[
        Plant {
            what: "an existing worktree's commondir to a crafted common dir",
            setup: &crafted_common_config,
            prelude: CRAFTED_COMMON,
            target: ".git/worktrees/linked/commondir",
            payload: &|_| "../../c\n".into(),
            exec: false,
            executes: true,
            also_in: &linked,
            extra: &no_paths,
        },
        Plant {
            what: "an existing worktree's config.worktree",
            setup: &worktree_config_on,
            prelude: "",
            target: ".git/worktrees/linked/config.worktree",
            payload: &|fx| fx.fsmonitor(),
            exec: false,
            executes: true,
            also_in: &linked,
            extra: &no_paths,
        },
        Plant {
            what: "an existing worktree's gitdir",
            setup: &nothing,
            prelude: "",
            target: ".git/worktrees/linked/gitdir",
            payload: &|fx| format!("{}/elsewhere/.git\n", fx.env.ws.display()),
            exec: false,
            executes: false,
            also_in: &linked,
            extra: &no_paths,
        },
    ]));
}

#[test]
fn a_submodule_s_config_and_hooks_cannot_be_written() {
    if !require_full_enforcement() {
        return;
    }
    let sub = |fx: &Fx| vec![fx.env.ws.join("sub")];
    assert_none(attack(&[
        Plant {
            what: "the submodule's config",
            setup: &nothing,
            prelude: "",
            target: ".git/modules/sub/config",
            payload: &|fx| {
                let config = std::fs::read_to_string(fx.env.ws.join(".git/modules/sub/config"))
                    .unwrap();
                format!("{config}{}", fx.fsmonitor())
            },
            exec: false,
            executes: true,
            also_in: &sub,
            extra: &no_paths,
        },
        Plant {
            what: "a hook of the submodule",
            setup: &nothing,
            prelude: "",
            target: ".git/modules/sub/hooks/pre-commit",
            payload: &|fx| fx.hook(),
            exec: true,
            executes: true,
            also_in: &sub,
            extra: &no_paths,
        },
        Plant {
            what: "the submodule's .git file, to a crafted git dir",
            setup: &nothing,
            prelude: "cp -r .git/modules/sub .git/evilsub && sed -i /worktree/d .git/evilsub/config && cat p-fsmonitor >> .git/evilsub/config && ",
            target: "sub/.git",
            payload: &|fx| {
                fx.put("p-fsmonitor", &fx.fsmonitor(), false);
                "gitdir: ../.git/evilsub\n".into()
            },
            exec: false,
            executes: true,
            also_in: &sub,
            extra: &no_paths,
        },
    ]));
}

#[test]
fn git_dirs_cannot_be_replaced_wholesale() {
    if !require_full_enforcement() {
        return;
    }
    // Moving a git directory (or the directory holding it) aside and making a new one in
    // its place would sidestep protection of the entries inside.
    let mut failures = vec![];
    for script in [
        "mv .git/modules/sub .git/modules/aside && cp -r .git/modules/aside .git/modules/sub && cat p >> .git/modules/sub/config",
        "mv .git/modules .git/modules-aside && cp -r .git/modules-aside .git/modules && cat p >> .git/modules/sub/config",
        "mv sub sub-aside && mkdir sub && echo 'gitdir: ../.git/evilsub' > sub/.git && cp -r .git/modules/sub .git/evilsub && sed -i /worktree/d .git/evilsub/config && cat p >> .git/evilsub/config",
        "mv .git/worktrees/linked .git/worktrees/aside && cp -r .git/worktrees/aside .git/worktrees/linked && cat p > .git/worktrees/linked/config.worktree",
        "mv .git/info .git/info-aside && mkdir .git/info && cp p .git/info/attributes",
        "rm -rf .git/info",
        "rm -rf .git/modules/sub/hooks && mkdir .git/modules/sub/hooks",
    ] {
        let fx = Fx::new();
        worktree_config_on(&fx);
        fx.put("p", &fx.fsmonitor(), false);
        let before = fx.snapshot(&[]);
        let out = fx.sandboxed("workspace-write", script);
        if out.status.code() == Some(0) {
            failures.push(format!("`{script}` succeeded inside the sandbox"));
        }
        if fx.snapshot(&[]) != before {
            failures.push(format!("`{script}` changed protected git metadata"));
        }
        for dir in [fx.env.ws.clone(), fx.env.ws.join("sub"), fx.linked.clone()] {
            failures.extend(
                fx.host_checks(&dir)
                    .into_iter()
                    .map(|p| format!("`{script}`: {p}")),
            );
        }
    }
    assert_none(failures);
}

#[test]
fn what_the_configuration_points_git_at_in_the_workspace_stays_read_only() {
    if !require_full_enforcement() {
        return;
    }
    assert_none(attack(&[
        Plant {
            what: "a workspace file the repository config includes",
            setup: &|fx| {
                fx.put("team.gitconfig", "[alias]\n\tst = status\n", false);
                let inc = s(&fx.env.ws.join("team.gitconfig"));
                fx.ok(&fx.env.ws, &["config", "include.path", &inc]);
            },
            prelude: "",
            target: "team.gitconfig",
            payload: &|fx| fx.fsmonitor(),
            exec: false,
            executes: true,
            also_in: &no_paths,
            extra: &|fx| vec![fx.env.ws.join("team.gitconfig")],
        },
        Plant {
            what: "a not yet existing workspace file the global config includes",
            setup: &|fx| {
                let inc = s(&fx.env.ws.join("global.inc"));
                fx.ok(&fx.env.ws, &["config", "--global", "include.path", &inc]);
            },
            prelude: "",
            target: "global.inc",
            payload: &|fx| fx.fsmonitor(),
            exec: false,
            executes: true,
            also_in: &no_paths,
            extra: &|fx| vec![fx.env.ws.join("global.inc")],
        },
        Plant {
            what: "a hook in the workspace directory core.hooksPath names",
            setup: &|fx| {
                let dir = fx.env.ws.join(".githooks");
                std::fs::create_dir(&dir).unwrap();
                fx.ok(&fx.env.ws, &["config", "core.hooksPath", &s(&dir)]);
            },
            prelude: "",
            target: ".githooks/pre-commit",
            payload: &|fx| fx.hook(),
            exec: true,
            executes: true,
            also_in: &no_paths,
            extra: &|fx| vec![fx.env.ws.join(".githooks")],
        },
        Plant {
            what: "the workspace script the repository config names as its fsmonitor",
            setup: &|fx| {
                fx.put("tools/fsmon.sh", "#!/bin/sh\nexit 1\n", true);
                fx.ok(&fx.env.ws, &["config", "core.fsmonitor", "tools/fsmon.sh"]);
            },
            prelude: "",
            target: "tools/fsmon.sh",
            payload: &|fx| fx.hook(),
            exec: true,
            executes: true,
            also_in: &no_paths,
            extra: &|fx| vec![fx.env.ws.join("tools/fsmon.sh")],
        },
        Plant {
            what: "the workspace script the global config names in a filter driver",
            setup: &|fx| {
                fx.put(
                    "tools/clean.py",
                    "import sys\nsys.stdout.write(sys.stdin.read())\n",
                    false,
                );
                fx.put(".gitattributes", "f filter=conv\n", false);
                fx.ok(
                    &fx.env.ws,
                    &[
                        "config",
                        "--global",
                        "filter.conv.clean",
                        "python3 tools/clean.py",
                    ],
                );
            },
            prelude: "",
            target: "tools/clean.py",
            payload: &|fx| {
                format!(
                    "import pathlib, sys\npathlib.Path({:?}).touch()\nsys.stdout.write(sys.stdin.read())\n",
                    fx.marker.display().to_string()
                )
            },
            exec: false,
            executes: true,
            also_in: &no_paths,
            extra: &|fx| vec![fx.env.ws.join("tools/clean.py")],
        },
        Plant {
            what: "core.hooksPath pointed at the workspace by a planted config.worktree",
            setup: &|fx| {
                worktree_config_on(fx);
                fx.put("myhooks/pre-commit", &fx.hook(), true);
            },
            prelude: "",
            target: ".git/config.worktree",
            payload: &|fx| format!("[core]\n\thooksPath = {}/myhooks\n", fx.env.ws.display()),
            exec: false,
            executes: true,
            also_in: &no_paths,
            extra: &no_paths,
        },
    ]));
}

#[test]
fn info_entries_cannot_be_created_or_changed() {
    if !require_full_enforcement() {
        return;
    }
    assert_none(attack(&[Plant {
        what: ".git/info/attributes naming a configured filter",
        setup: &|fx| {
            // A filter the user trusts for some files (as git-lfs installs one).
            let clean = format!("touch {}; cat", fx.marker.display());
            fx.ok(&fx.env.ws, &["config", "filter.up.clean", &clean]);
        },
        prelude: "",
        target: ".git/info/attributes",
        payload: &|_| "* filter=up\n".into(),
        exec: false,
        executes: true,
        also_in: &no_paths,
        extra: &no_paths,
    }]));
}

#[test]
fn racing_a_symlinked_directory_or_the_path_buffer_plants_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let prepare = || {
        let fx = Fx::new();
        for dir in ["d/hooks", "d/info", "ok/hooks", "ok/info"] {
            std::fs::create_dir_all(fx.env.ws.join(dir)).unwrap();
        }
        std::os::unix::fs::symlink(".git", fx.env.ws.join("dl")).unwrap();
        fx.put("src", &fx.hook(), true);
        fx
    };
    let parse = |out: &str| -> (u64, u64) {
        let field = |name: &str| {
            out.split_whitespace()
                .skip_while(|w| *w != name)
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {out:?}"))
        };
        (field("landed"), field("breaches"))
    };
    // Control: unprotected, the race does reach `.git`.
    let fx = prepare();
    let out = fx.env.probe("full-access", &["git-race", "200"]);
    let (_, breaches) = parse(&out);
    assert!(breaches > 0, "control reached nothing in .git: {out}");

    let fx = prepare();
    let before = fx.snapshot(&[]);
    let out = fx.env.probe("workspace-write", &["git-race", "2000"]);
    let (landed, breaches) = parse(&out);
    assert!(landed > 0, "the benign side never succeeded: {out}");
    assert_eq!(breaches, 0, "{out}");
    for name in ["commondir", "gitdir", "info/attributes", "hooks/pre-commit"] {
        assert!(
            std::fs::symlink_metadata(fx.env.ws.join(".git").join(name)).is_err(),
            ".git/{name} exists: {out}"
        );
    }
    assert_eq!(fx.snapshot(&[]), before, "{out}");
    assert_none(fx.host_checks(&fx.env.ws));
}

/// The `sandgate: denied` markers in `stderr`.
#[test]
fn each_refused_write_is_marked_as_protected_git_metadata() {
    if !require_full_enforcement() {
        return;
    }
    let cases: [(&[&str], &str); 8] = [
        (&["create", ".git/commondir"], ".git/commondir"),
        (&["create", ".git/config.worktree"], ".git/config.worktree"),
        (&["rename", "src1", ".git/commondir"], ".git/commondir"),
        (
            &["link", "src2", ".git/info/attributes"],
            ".git/info/attributes",
        ),
        (
            &["symlink", "src", ".git/modules/sub/hooks/pre-commit"],
            ".git/modules/sub/hooks/pre-commit",
        ),
        (
            &["write", ".git/modules/sub/config"],
            ".git/modules/sub/config",
        ),
        (
            &["write", ".git/worktrees/linked/gitdir"],
            ".git/worktrees/linked/gitdir",
        ),
        (
            &["create", ".git/worktrees/linked/commondir.new"],
            ".git/worktrees/linked/commondir.new",
        ),
    ];
    // Control: each is an ordinary write the host allows.
    let fx = Fx::new();
    for src in ["src", "src1", "src2"] {
        fx.put(src, "x\n", false);
    }
    for (args, _) in &cases {
        assert_eq!(fx.env.probe("full-access", args), "ok", "{args:?}");
    }
    let fx = Fx::new();
    for src in ["src", "src1", "src2"] {
        fx.put(src, "x\n", false);
    }
    let probe = probe();
    for (args, target) in cases {
        if target.ends_with(".new") {
            // Not a sensitive name: allowed, and no marker.
            let mut argv = vec![probe.to_string_lossy().into_owned()];
            argv.extend(args.iter().map(|a| (*a).to_owned()));
            let (out, found) = fx.env.run_logged("workspace-write", &argv);
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                "ok",
                "{}",
                show(&out)
            );
            assert!(found.is_empty(), "{found:?}");
            continue;
        }
        let mut argv = vec![probe.to_string_lossy().into_owned()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let (out, found) = fx.env.run_logged("workspace-write", &argv);
        let verdict = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(verdict.starts_with("err:"), "{args:?}: {}", show(&out));

        if !observing() {
            assert!(found.is_empty(), "{}", show(&out));
            continue;
        }
        let path = s(&fx.env.ws.join(target));
        let m = found
            .iter()
            .find(|m| m["path"] == path.as_str())
            .unwrap_or_else(|| panic!("{args:?}: no marker names {path}: {}", show(&out)));
        assert_eq!(m["op"], "git_metadata", "{args:?}: {m}");
        assert_eq!(m["needed"], "full-access", "{args:?}: {m}");
        let hint = format!("{} {}", m["hint"], m["retry"]["hint"]).to_lowercase();
        assert!(
            hint.contains("protected git metadata"),
            "{args:?}: the hint does not say why: {m}"
        );
    }
}

#[test]
fn git_keeps_working_inside_the_sandbox() {
    if !require_full_enforcement() {
        return;
    }
    let fx = Fx::new();
    let ws = fx.env.ws.clone();
    // A newer commit upstream of `sub`, and a second submodule registered but not cloned.
    fx.ok(&fx.subsrc, &["commit", "-q", "--allow-empty", "-m", "s2"]);
    fx.ok(
        &ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &s(&fx.subsrc),
            "sub2",
        ],
    );
    fx.ok(&ws, &["commit", "-q", "-m", "sub2"]);
    fx.ok(&ws, &["submodule", "deinit", "-q", "-f", "sub2"]);
    std::fs::remove_dir_all(ws.join(".git/modules/sub2")).unwrap();
    fx.ok(&ws, &["submodule", "init", "-q", "sub2"]);
    let script = r#"set -e
G="git -c user.name=t -c user.email=t@example.com -c protocol.file.allow=always"
echo a > a && $G add a && $G commit -qm one
$G commit -q --amend -m one-amended
$G branch feature
$G checkout -q feature
echo p > pk && $G add pk && $G commit -qm pickme
$G checkout -q main
echo c > c && $G add c && $G commit -qm four
$G cherry-pick feature >/dev/null
$G merge -q --no-edit feature
$G tag -a v1 -m v1 && $G tag light
$G checkout -q -b topic v1
echo t > t && $G add t && $G commit -qm t1
echo u > u && $G add u && $G commit -qm t2
$G checkout -q main
echo m > m && $G add m && $G commit -qm m1
$G checkout -q topic
$G rebase -q main
GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/reword/' GIT_EDITOR='sed -i 1s/^/reworded-/' $G rebase -q -i HEAD~2
echo dirty >> a && $G stash -q && test "$(cat a)" = a
$G gc -q
$G worktree add -q wt2 -b wtb
(cd wt2 && echo w > w && $G add w && $G commit -qm in-worktree)
$G checkout -q main
$G submodule update -q sub2
"#;
    let out = fx.sandboxed("workspace-write", script);
    assert_status(&out, 0);
    let log = |rev: &str| fx.ok(&ws, &["log", "--format=%s", rev]);
    let main = log("main");
    for subject in [
        "m1",
        "Merge branch 'feature'",
        "pickme",
        "four",
        "one-amended",
    ] {
        assert!(main.lines().any(|l| l == subject), "{subject} in {main}");
    }
    assert!(!main.lines().any(|l| l == "one"), "{main}");
    let topic: Vec<String> = log("topic").lines().map(str::to_owned).collect();
    assert_eq!(topic[..3], ["t2", "reworded-t1", "m1"], "{topic:?}");
    assert_eq!(log("wtb").lines().next(), Some("in-worktree"));
    let branches = fx.ok(&ws, &["branch", "--format=%(refname:short)"]);
    for b in ["feature", "main", "topic", "wtb", "linked"] {
        assert!(branches.lines().any(|l| l == b), "{b} in {branches}");
    }
    assert_eq!(fx.ok(&ws, &["tag"]), "light\nv1\n");
    assert_eq!(fx.ok(&ws, &["stash", "list"]).lines().count(), 1);
    assert!(fx.ok(&ws, &["worktree", "list"]).contains("/wt2 "));
    assert_eq!(
        fx.ok(&ws.join("sub2"), &["log", "-1", "--format=%s"]),
        "s2\n"
    );
    assert_none(fx.host_checks(&ws));
    // Updating a submodule that existed at the start rewrites its (guarded) config, which
    // the supervisor replaces with a checked copy.
    let out = fx.sandboxed(
        "workspace-write",
        "git -c protocol.file.allow=always submodule update -q --remote sub",
    );
    assert_status(&out, 0);
    assert_eq!(
        fx.ok(&ws.join("sub"), &["log", "-1", "--format=%s"]),
        "s2\n"
    );
    assert_none(fx.host_checks(&ws));
}
