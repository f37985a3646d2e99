//! Red team, round 3: the supervisor's git seal against configuration the user already
//! has, the `/dev` stand-in, kept processes and their time limit, a home chosen as the
//! workspace, and sandgate's own directories. Each test performs the attack as the
//! sandboxed command would and asserts that it fails (with a control under `full-access`
//! where one shows that the payload and its trigger are real).
//!
//! An attack that gets through is a failing test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

/// Single-quotes `s` for the shell.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A test's workspace with a home of its own, which both sandgate and the host's git read.
struct Home {
    env: TestEnv,
    home: PathBuf,
}

impl Home {
    fn new(gitconfig: &str) -> Home {
        let env = TestEnv::new();
        let home = env.root.join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(home.join(".gitconfig"), gitconfig).unwrap();
        Home { env, home }
    }

    /// The host's git in `dir`, as a user runs it: a clean environment, the test's `HOME`,
    /// no system configuration.
    fn git(&self, dir: &Path) -> Command {
        host_git(&self.home, dir)
    }

    #[track_caller]
    fn ok(&self, dir: &Path, args: &[&str]) {
        let out = output(self.git(dir).args(args));
        assert_status(&out, 0);
    }

    /// Where a payload tagged `tag` leaves its mark.
    fn mark(&self, tag: &str) -> PathBuf {
        self.env.outside.join(tag)
    }

    /// A shell script that leaves the mark `tag`.
    fn script(&self, tag: &str) -> String {
        format!("#!/bin/sh\ntouch '{}'\n", self.mark(tag).display())
    }

    /// Runs a `/bin/sh -c` script under `mode` in the workspace with this `HOME`.
    fn sh(&self, mode: &str, script: &str) -> Output {
        let mut cmd = self.env.sandgate(mode);
        cmd.env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["--timeout", "60s", "--", "/bin/sh", "-c", script]);
        output(&mut cmd)
    }
}

/// Attack: the user's *global* configuration has a relative `core.hooksPath`
/// (`git config --global core.hooksPath .githooks`, a team convention). git finds a
/// relative hooks path from the top of the working tree of whichever repository it runs
/// in. sandgate resolves it against the workspace only and keeps `WS/.githooks`
/// read-only; but the command can `git init` a repository in a subdirectory (or use a
/// nested one that was already there) and write `sub/.githooks/pre-commit`, executable:
/// no directory named `hooks` is involved, so no seal rule applies. The host's next
/// `git commit` in `sub` runs it. Single call, no race, as root and unprivileged.
///
/// It should fail because nothing a command writes can make git run a program, "in any
/// repository anywhere it writes, whether it existed when the call started, was cloned or
/// `git init`ed inside". (A directory named as a relative hooks path's last component
/// now obeys the seal rules of a `hooks` directory, wherever it is.)
#[test]
fn redteam_a_global_relative_hooks_path_runs_hooks_of_a_repository_made_inside() {
    if !require_full_enforcement() {
        return;
    }
    let h = Home::new(
        "[user]\n\tname = t\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n[core]\n\thooksPath = .githooks\n",
    );
    let ws = &h.env.ws;
    h.ok(ws, &["init", "-q"]);
    h.ok(ws, &["commit", "-q", "--allow-empty", "-m", "init"]);
    std::fs::create_dir(ws.join(".githooks")).unwrap();
    // A repository nested in the workspace before the call, not a submodule.
    let nested = ws.join("nested");
    std::fs::create_dir(&nested).unwrap();
    h.ok(&nested, &["init", "-q"]);
    h.ok(&nested, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let mut failures = Vec::new();
    for (tag, setup) in [("made", "git init -q made"), ("nested", "true")] {
        let script = format!(
            "{setup} && mkdir -p {tag}/.githooks && printf %s {} > {tag}/.githooks/pre-commit && chmod +x {tag}/.githooks/pre-commit",
            sq(&h.script(tag))
        );
        let out = h.sh("workspace-write", &script);
        let repo = ws.join(tag);
        if repo.join(".git").exists() {
            let _ = output(
                h.git(&repo)
                    .args(["commit", "-q", "--allow-empty", "-m", "x"]),
            );
        }
        if h.mark(tag).exists() {
            failures.push(format!(
                "{tag}: the host's git commit ran {tag}/.githooks/pre-commit, planted inside\n{}",
                show(&out)
            ));
        }
    }
    assert_none(failures);
}

/// Attack: a home chosen as the workspace (`--workspace ~`). Its dot-entries are read-only,
/// and so is every top-level entry that a *shell* startup file names; but the host runs
/// programs whose own startup files are dot-entries too and name scripts elsewhere in the
/// home: `~/.vimrc` with `source ~/vimfiles/local.vim`, `~/.tmux.conf` with `run-shell
/// ~/scripts/tmux-init.sh` (or a status line's `#(~/scripts/battery.sh)`, which runs on
/// every `tmux attach`). Those files are not among the startup files sandgate reads, so
/// `~/vimfiles` and `~/scripts` stay writable: the command rewrites them and the user's
/// next `vim` or `tmux` runs its code.
///
/// It should fail because a home chosen as a workspace "keeps what the host runs
/// read-only", by rule rather than by a list of tools.
#[test]
fn redteam_home_workspace_rewrites_scripts_that_vimrc_and_tmux_conf_name() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    for dir in ["vimfiles", "scripts"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    let write = |rel: &str, text: &str| std::fs::write(home.join(rel), text).unwrap();
    write(".vimrc", "source ~/vimfiles/local.vim\n");
    write("vimfiles/local.vim", "\" the user's settings\n");
    write(
        ".tmux.conf",
        "run-shell ~/scripts/tmux-init.sh\nset -g status-right '#(~/scripts/battery.sh)'\n",
    );
    write("scripts/tmux-init.sh", "#!/bin/sh\ntrue\n");
    write("scripts/battery.sh", "#!/bin/sh\necho 99%\n");
    write(".bashrc", "export EDITOR=vim\n");
    let vim_mark = env.outside.join("vim");
    let tmux_mark = env.outside.join("tmux");
    let script = format!(
        "echo {} > ~/vimfiles/local.vim; printf %s {} > ~/scripts/tmux-init.sh; printf %s {} > ~/scripts/battery.sh; true",
        sq(&format!("call system('touch {}')", vim_mark.display())),
        sq(&format!("#!/bin/sh\ntouch '{}'\n", tmux_mark.display())),
        sq(&format!("#!/bin/sh\ntouch '{}'\n", tmux_mark.display())),
    );
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.env("HOME", &home)
        .arg("--workspace")
        .arg(&home)
        .current_dir(&home)
        .args(["--timeout", "60s", "--", "/bin/sh", "-c", &script]);
    let out = output(&mut cmd);
    let mut failures = Vec::new();
    let local = std::fs::read_to_string(home.join("vimfiles/local.vim")).unwrap_or_default();
    if local.contains("system(") {
        failures.push(format!(
            "~/vimfiles/local.vim, which ~/.vimrc sources, was rewritten\n{}",
            show(&out)
        ));
    }
    for script in ["tmux-init.sh", "battery.sh"] {
        let text = std::fs::read_to_string(home.join("scripts").join(script)).unwrap_or_default();
        if text.contains("touch") {
            failures.push(format!(
                "~/scripts/{script}, which ~/.tmux.conf runs, was rewritten"
            ));
        }
    }
    assert_none(failures);
}

/// Runs `script` under `workspace-write` with `home` as `HOME` and as the workspace.
fn in_home_workspace(env: &TestEnv, home: &Path, script: &str) -> Output {
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.env("HOME", home)
        .arg("--workspace")
        .arg(home)
        .current_dir(home)
        .args(["--timeout", "60s", "--", "/bin/sh", "-c", script]);
    output(&mut cmd)
}

/// Attack: a home chosen as the workspace, with a systemd user unit (a persistence path
/// sandgate reads for the paths it names) that runs a script in the home the way systemd
/// spells it: `ExecStart=%h/scripts/backup.sh` (`%h` is systemd's specifier for the home).
/// sandgate expands only `~/`, `$HOME` and `${HOME}`, so `~/scripts` is not sealed: the
/// command appends to the script, and the user's timer (or next login, for a
/// `default.target` unit) runs it on the host.
///
/// It should fail because the top-level entry holding "a path that one of the home's
/// startup files names" stays read-only.
#[test]
fn redteam_home_workspace_rewrites_a_script_a_systemd_unit_names_with_percent_h() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let units = home.join(".config/systemd/user");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::create_dir_all(home.join("scripts")).unwrap();
    std::fs::write(
        units.join("backup.service"),
        "[Unit]\nDescription=backup\n\n[Service]\nType=oneshot\nExecStart=%h/scripts/backup.sh\n",
    )
    .unwrap();
    std::fs::write(home.join("scripts/backup.sh"), "#!/bin/sh\necho backup\n").unwrap();
    let out = in_home_workspace(
        &env,
        &home,
        "echo 'echo planted' >> ~/scripts/backup.sh; true",
    );
    let text = std::fs::read_to_string(home.join("scripts/backup.sh")).unwrap_or_default();
    assert!(
        !text.contains("planted"),
        "~/scripts/backup.sh, which a systemd user unit runs as %h/scripts/backup.sh, was rewritten\n{}",
        show(&out)
    );
}

/// Attack: the startup files are read breadth first within a budget of 64 files, and the
/// entries of a startup directory come level by level, so every file directly in
/// `~/.local/bin` is read before any systemd unit (`~/.config/systemd/user/*.service`,
/// two levels down) or fish `conf.d` script. A user with 70 console scripts in
/// `~/.local/bin` (what a few `pip install --user` leave: text files with a shebang) uses
/// up the budget; the unit's `ExecStart=/home/u/scripts/backup.sh` and the `conf.d` file's
/// `source ~/scripts/prompt.fish` are never read, `~/scripts` stays writable, and the
/// command rewrites what the host's timer and next fish login run. Control: with an empty
/// `~/.local/bin` the same write is refused.
///
/// It should fail because a top-level entry that a startup file names stays read-only; a
/// bound that stops reading should seal more, not less.
#[test]
fn redteam_home_workspace_a_full_local_bin_hides_what_systemd_and_fish_name() {
    if !require_full_enforcement() {
        return;
    }
    let mut failures = Vec::new();
    for scripts in [0, 70] {
        let env = TestEnv::new();
        let home = env.root.join("home");
        for dir in [
            ".config/systemd/user",
            ".config/fish/conf.d",
            ".local/bin",
            "scripts",
        ] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        let write = |rel: &str, text: &str| std::fs::write(home.join(rel), text).unwrap();
        write(
            ".config/systemd/user/backup.service",
            &format!(
                "[Service]\nType=oneshot\nExecStart={}\n",
                home.join("scripts/backup.sh").display()
            ),
        );
        write(
            ".config/fish/conf.d/prompt.fish",
            "source ~/scripts/prompt.fish\n",
        );
        write("scripts/backup.sh", "#!/bin/sh\n");
        write("scripts/prompt.fish", "# prompt\n");
        for i in 0..scripts {
            write(
                &format!(".local/bin/tool{i}"),
                "#!/usr/bin/python3\nimport sys\nsys.exit(0)\n",
            );
        }
        let out = in_home_workspace(
            &env,
            &home,
            "echo planted >> ~/scripts/backup.sh; echo planted >> ~/scripts/prompt.fish; true",
        );
        for script in ["backup.sh", "prompt.fish"] {
            let text =
                std::fs::read_to_string(home.join("scripts").join(script)).unwrap_or_default();
            if text.contains("planted") {
                failures.push(format!(
                    "with {scripts} scripts in ~/.local/bin: ~/scripts/{script} was rewritten\n{}",
                    show(&out)
                ));
            }
        }
    }
    assert_none(failures);
}

/// Attack: the fix for round 2's `core.worktree` attack refuses a new `.git/config` that
/// changes `core.worktree` beside a relative `core.hooksPath` — judged per file. git reads
/// `config.worktree` too once `extensions.worktreeConfig` is set (a plain setting), so the
/// command leaves `.git/config` with the user's `hooksPath = .githooks` untouched but for
/// `extensions.worktreeConfig = true`, and writes `core.worktree = WS/evil` into
/// `.git/config.worktree` (git's own `git config --worktree`, a checked rename). The
/// working tree, and with it the relative hooks path, moves to `evil/.githooks`, whose
/// `pre-commit` the host's next `git commit` runs. Single call, no race.
///
/// It should fail because `core.worktree` "may not change beside" a relative
/// `core.hooksPath` in a repository's own configuration.
#[test]
fn redteam_core_worktree_in_config_worktree_moves_a_relative_hooks_path() {
    if !require_full_enforcement() {
        return;
    }
    let h =
        Home::new("[user]\n\tname = t\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n");
    let ws = &h.env.ws;
    h.ok(ws, &["init", "-q"]);
    h.env
        .put(".githooks/pre-commit", "#!/bin/sh\nexit 0\n", 0o755);
    h.ok(ws, &["config", "core.hooksPath", ".githooks"]);
    h.ok(ws, &["add", "-A"]);
    h.ok(ws, &["commit", "-q", "-m", "hooks"]);
    let script = format!(
        "mkdir -p evil/.githooks && printf %s {} > evil/.githooks/pre-commit && chmod +x evil/.githooks/pre-commit && git config extensions.worktreeConfig true && git config --worktree core.worktree \"$PWD/evil\"",
        sq(&h.script("worktree"))
    );
    let out = h.sh("workspace-write", &script);
    let _ = output(h.git(ws).args(["commit", "-q", "--allow-empty", "-m", "x"]));
    assert!(
        !h.mark("worktree").exists(),
        "the host's git commit ran evil/.githooks/pre-commit through core.worktree in config.worktree\n{}",
        show(&out)
    );
}

/// Attack on the `/dev` stand-in: reach a host device another way than by its name in
/// `/dev` — a disk, `kmsg`, `mem`, `loop-control`, `fuse`, `net/tun`, `kvm` by name; a
/// device node made in the workspace or the private `/tmp` (`mknod`, which the supervisor
/// performs, as root too); a new terminal pair from `/dev/ptmx` (it would allocate in the
/// host's `devpts` instance); and a stray entry made in the stand-in itself.
///
/// It should fail because `/dev` "is a stand-in holding `null`, `zero`, `full`, `random`,
/// `urandom`, `tty`, `ptmx`, the caller's terminal and the `fd`/`stdin`/`stdout`/`stderr`
/// links".
#[test]
fn redteam_the_dev_stand_in_reaches_no_host_device() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let script = r#"
for p in /dev/vda /dev/sda /dev/nvme0n1 /dev/kmsg /dev/mem /dev/port /dev/loop-control /dev/loop0 /dev/fuse /dev/net/tun /dev/kvm /dev/console /dev/tty1 /dev/ttyS0 /dev/hugepages /dev/disk; do
  [ -e "$p" ] && echo "present $p"
done
mknod ws-null c 1 3 2>/dev/null && echo "made ws-null"
mknod /tmp/mem c 1 1 2>/dev/null && echo "made /tmp/mem"
mknod /dev/shm/kmsg c 1 11 2>/dev/null && echo "made /dev/shm/kmsg"
touch /dev/planted 2>/dev/null && echo "made /dev/planted"
mkdir /dev/pts/x 2>/dev/null && echo "made /dev/pts/x"
( exec 3<>/dev/ptmx ) 2>/dev/null && echo "opened /dev/ptmx"
for e in /dev/* /dev/pts/*; do
  case "${e#/dev/}" in null|zero|full|random|urandom|tty|ptmx|fd|stdin|stdout|stderr|shm|pts|mqueue|'pts/*') ;; *) echo "entry $e" ;; esac
done
true
"#;
    // Without a mount namespace (the landlock backend) `/dev` is the host's: its names can
    // be seen (a known limit), but no device beyond the stand-in's can be opened.
    let script = match landlock_backend() {
        true => script
            .replace(
                r#"[ -e "$p" ] && echo "present $p""#,
                r#"( exec 3<"$p" ) 2>/dev/null && echo "opened $p""#,
            )
            .replace(
                r#"*) echo "entry $e" ;;"#,
                r#"*) [ -d "$e" ] || { ( exec 3<"$e" ) 2>/dev/null && echo "opened $e"; } ;;"#,
            ),
        false => script.to_owned(),
    };
    let mut failures = Vec::new();
    for mode in ["read-only", "workspace-write"] {
        let out = env.sh(mode, &script);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        if !said.trim().is_empty() {
            failures.push(format!("{mode}:\n{said}"));
        }
    }
    // Control: the host's /dev holds more than the stand-in.
    let out = env.sh("full-access", "ls /dev | wc -l");
    let count: usize = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(count > 14, "control: the host's /dev lists {count} entries");
    assert_none(failures);
}

/// Attack: a kept call with allowed hosts has helpers outside the namespace (its detached
/// supervisor, the proxy). The kept processes end at `--timeout`; the call's helpers
/// might not, and would keep a listening proxy (and the supervisor) alive on the host.
///
/// It should fail because kept processes "end at the call's --timeout", and nothing of the
/// call outlives what it asked to keep.
#[test]
fn redteam_a_kept_calls_proxy_and_supervisor_end_at_its_time_limit() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("rt3-kept");
    let mut cmd = env.sandgate("workspace-write");
    // The mark rides in the environment: sandgate, its helpers and the kept sleep hold it.
    cmd.env("LEFTOVER_MARK", &mark).args([
        "--keep-background",
        "--timeout",
        "3s",
        "--allow-host",
        "example.com",
        "--",
        "/bin/sh",
        "-c",
        "sleep 300 >/dev/null 2>&1 </dev/null & echo started",
    ]);
    let out = output(&mut cmd);
    // Without a PID namespace (the landlock backend) nothing can be kept: refused.
    if landlock_backend() {
        let left = processes_marked(&mark);
        kill_marked(&mark);
        assert_status(&out, 78);
        assert!(left.is_empty(), "{left:?}");
        return;
    }
    assert_status(&out, 0);
    let describe = |pids: &[i32]| -> Vec<String> {
        pids.iter()
            .map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                )
            })
            .collect()
    };
    let kept = processes_marked(&mark);
    assert!(
        !kept.is_empty(),
        "control: nothing was kept\n{}",
        show(&out)
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(12);
    let mut left = processes_marked(&mark);
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        left = processes_marked(&mark);
    }
    let left = describe(&left);
    kill_marked(&mark);
    env.stop_kept();
    assert!(
        left.is_empty(),
        "still running 12 s after a 3 s limit:\n{}",
        left.join("\n")
    );
}
