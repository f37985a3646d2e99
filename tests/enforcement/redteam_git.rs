//! Red team A: attacks on the git seal (README, *Git's metadata*) through the places where
//! the supervisor's check and its action drift apart, and through configuration the
//! checker lets pass. Each test performs the attack under `workspace-write` and then runs
//! the host's own git as a user would (clean environment, the test's `HOME`); every
//! payload would leave a file in the test's outside directory, and each test asserts that
//! none did. A control under `full-access` shows that the payload and its trigger are real.
//!
//! An attack that gets through is a failing test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

/// The user's git identity, in the test's own `HOME`.
const GITCONFIG: &str =
    "[user]\n\tname = t\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n";

/// A test's workspace with a home for the host's git.
struct Repo {
    env: TestEnv,
    home: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let env = TestEnv::new();
        let home = env.root.join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(home.join(".gitconfig"), GITCONFIG).unwrap();
        Repo { env, home }
    }

    /// The host's git in `dir`, as a user runs it: a clean environment, the test's `HOME`,
    /// no system configuration.
    fn git(&self, dir: &Path) -> Command {
        host_git(&self.home, dir)
    }

    #[track_caller]
    fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = output(self.git(dir).args(args));
        assert_status(&out, 0);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A repository with one commit at `dir`.
    fn init(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        self.ok(dir, &["init", "-q"]);
        self.ok(dir, &["commit", "-q", "--allow-empty", "-m", "init"]);
    }

    /// Where a payload tagged `tag` leaves its mark.
    fn mark(&self, tag: &str) -> PathBuf {
        self.env.outside.join(tag)
    }

    /// A shell script that leaves the mark `tag`.
    fn script(&self, tag: &str) -> String {
        format!("#!/bin/sh\ntouch '{}'\n", self.mark(tag).display())
    }

    /// Runs a `/bin/sh -c` script under `mode` in the workspace, bounded in time.
    fn sh(&self, mode: &str, extra: &[&str], script: &str) -> Output {
        let mut cmd = self.env.sandgate(mode);
        cmd.args(["--timeout", "60s"])
            .args(extra)
            .args(["--", "/bin/sh", "-c", script]);
        cmd.env("PROBE", probe());
        output(&mut cmd)
    }
}

/// Returns true when `path` is a regular file with an execute bit.
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Single-quotes `s` for the shell.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Attack: the supervisor decides an open on what it found at the name. For an existing
/// directory it performs the open as asked ("the kernel says EISDIR"), keeping the
/// caller's `O_CREAT` and mode; `seal::create`'s "files made in `hooks` lose their execute
/// bits" is never applied. A second thread removes the directory (landlock lets the
/// sandbox remove) between the supervisor's `fstatat` and its `openat`, so the open
/// creates `hooks/pre-commit` with mode 0755: an executable hook, which the host's next
/// `git commit` runs. Targets: a repository nested in the workspace (it existed at the
/// start, but only the workspace's own git directory is guarded by a mount) and one made
/// inside with `git init`.
///
/// It should fail because nothing in a `hooks` directory may become executable.
#[test]
fn redteam_creat_race_on_a_removed_directory_makes_an_executable_hook() {
    if !require_full_enforcement() {
        return;
    }
    let r = Repo::new();
    let nested = r.env.ws.join("nested");
    r.init(&nested);
    let made = r.env.ws.join("made");
    let cases: [(&str, &Path, &str); 2] = [
        ("nested", &nested, ""),
        (
            "made",
            &made,
            "mkdir made && cd made && git init -q && git -c user.name=t -c user.email=t@e commit -q --allow-empty -m i && cd .. && ",
        ),
    ];
    let mut failures = Vec::new();
    for (tag, repo, setup) in cases {
        let hook = repo.join(".git/hooks/pre-commit");
        let script = format!(
            "{setup}\"$PROBE\" creat-race {} 400000 3 {}",
            sq(&hook.display().to_string()),
            sq(&r.script(tag))
        );
        let out = r.sh("workspace-write", &[], &script);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        if executable(&hook) {
            failures.push(format!(
                "{tag}: an executable {} landed ({})",
                hook.display(),
                said.trim()
            ));
        }
        let _ = output(
            r.git(repo)
                .args(["commit", "-q", "--allow-empty", "-m", "x"]),
        );
        if r.mark(tag).exists() {
            failures.push(format!("{tag}: the host's git commit ran the planted hook"));
        }
    }
    // Control: the same hook written under full-access runs on the host's commit.
    let control = r.env.ws.join("control");
    r.init(&control);
    let hook = control.join(".git/hooks/pre-commit");
    let out = r.sh(
        "full-access",
        &[],
        &format!(
            // Bounded by time, not tries: on a loaded machine a thousand tries can all
            // meet the racer's directory.
            "\"$PROBE\" creat-race {} 100000000 10 {}",
            sq(&hook.display().to_string()),
            sq(&r.script("control"))
        ),
    );
    assert_status(&out, 0);
    r.ok(&control, &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(r.mark("control").exists(), "control: the hook did not run");
    assert_none(failures);
}

/// Attack: two supervisors in one workspace. A call kept with `--keep-background` (its
/// own detached supervisor) keeps exchanging `.git/X`, a directory, with `.git/Y`, a file
/// of attacker configuration (`core.fsmonitor`). A second call keeps renaming `.git/X`
/// onto `.git/config`. Its supervisor judges the rename on the kind it saw at `X`: a
/// directory renamed to `config` is a plain rename (`seal::rename` sends only a *regular
/// file* through the checked copy), so when the other supervisor exchanges the two names
/// between that check and the `renameat2`, the unchecked file lands as the workspace's
/// own `.git/config` — the guarded one. The host's next `git status` runs the fsmonitor.
///
/// It should fail because a configuration naming a program never lands by the sandbox's
/// hand, and the workspace's git directory is guarded.
#[test]
fn redteam_second_supervisor_swaps_a_directory_for_configuration_during_a_rename() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let r = Repo::new();
    r.init(&r.env.ws);
    let git = r.env.ws.join(".git");
    let evil = format!(
        "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch '{}'; false\"\n",
        r.mark("fsmonitor").display()
    );
    // The kept call: waits for the second call to start (so that X is not a mount point
    // of that call's guarded git directory), makes X and Y, and exchanges them.
    let kept = format!(
        "( while [ ! -e go ]; do sleep 0.05; done; mkdir .git/X && printf %s {} > .git/Y && \"$PROBE\" exchange-until .git/X .git/Y stop 20 ) >/dev/null 2>&1 </dev/null & echo started",
        sq(&evil)
    );
    let out = r.sh("workspace-write", &["--keep-background"], &kept);
    assert_status(&out, 0);
    let racer =
        "touch go; i=0; while [ ! -e .git/Y ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
                 \"$PROBE\" rename-until .git/X .git/config 400000 4 fsmonitor; touch stop";
    let out = r.sh("workspace-write", &[], racer);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    r.env.stop_kept();
    let mut failures = Vec::new();
    let config = std::fs::read_to_string(git.join("config")).unwrap_or_default();
    if config.contains("fsmonitor") {
        failures.push(format!(
            "attacker configuration landed as .git/config ({}):\n{config}",
            said.trim()
        ));
    }
    let _ = output(r.git(&r.env.ws).args(["status", "--short"]));
    if r.mark("fsmonitor").exists() {
        failures.push("the host's git status ran the planted core.fsmonitor".into());
    }
    // Control: the same configuration under full-access runs on the host's git status.
    let control = r.env.ws.join("control");
    r.init(&control);
    let control_config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch '{}'; false\"\n",
        r.mark("control").display()
    );
    let out = r.sh(
        "full-access",
        &[],
        &format!(
            "printf %s {} > {}",
            sq(&control_config),
            sq(&control.join(".git/config").display().to_string())
        ),
    );
    assert_status(&out, 0);
    let _ = output(r.git(&control).args(["status", "--short"]));
    assert!(
        r.mark("control").exists(),
        "control: the fsmonitor did not run"
    );
    assert_none(failures);
}

/// Attack: the workspace's repository keeps its hooks in the working tree with a relative
/// `core.hooksPath` (`.githooks`, husky's `.husky/_`, …). sandgate keeps that directory
/// read-only, resolved against the workspace. But a relative `core.hooksPath` is relative to
/// the top of the *working tree*, and `core.worktree` is "not judged": a `git config
/// core.worktree DIR` inside (a checked rewrite of `.git/config` that keeps the user's
/// `hooksPath` as it was) moves the working tree to a directory of the sandbox's making,
/// whose `.githooks/pre-commit` the host's next `git commit` runs. Single call, no race.
///
/// It should fail because nothing a command writes can make git run a program.
#[test]
fn redteam_core_worktree_moves_a_relative_hooks_path_out_of_its_protection() {
    if !require_full_enforcement() {
        return;
    }
    let r = Repo::new();
    let ws = &r.env.ws;
    r.init(ws);
    std::fs::create_dir(ws.join(".githooks")).unwrap();
    r.env
        .put(".githooks/pre-commit", "#!/bin/sh\nexit 0\n", 0o755);
    r.ok(ws, &["config", "core.hooksPath", ".githooks"]);
    r.ok(ws, &["add", "-A"]);
    r.ok(ws, &["commit", "-q", "-m", "hooks"]);
    let script = format!(
        "mkdir -p evil/.githooks && printf %s {} > evil/.githooks/pre-commit && chmod +x evil/.githooks/pre-commit && git config core.worktree \"$PWD/evil\"",
        sq(&r.script("worktree"))
    );
    let out = r.sh("workspace-write", &[], &script);
    let _ = output(r.git(ws).args(["commit", "-q", "--allow-empty", "-m", "x"]));
    let mut failures = Vec::new();
    if r.mark("worktree").exists() {
        failures.push(format!(
            "the host's git commit ran a hook the sandbox planted through core.worktree\n{}",
            show(&out)
        ));
    }
    assert_none(failures);
}

/// Attack: the mode, times and owner of git's metadata changed by a path the supervisor
/// performs for (a guarded git directory's top level is reached through sandgate's own
/// handle): `.git/config` or `.git/hooks` made writable by others lets another user of the
/// host plant what git runs. Should fail: git metadata stays as it was.
#[test]
fn redteam_git_metadata_keeps_its_mode_and_times() {
    let env = TestEnv::new();
    init_repository(&env.ws);
    let looks = |rel: &str| {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(env.ws.join(rel)).unwrap();
        (m.mode(), m.mtime(), m.mtime_nsec())
    };
    let before = (looks(".git/config"), looks(".git/hooks"));
    let out = env.sh(
        "workspace-write",
        "chmod 666 .git/config; chmod 777 .git/hooks; touch -d 2001-01-01 .git/config; \
         chmod g+w .git/hooks; echo done",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "done",
        "{}",
        show(&out)
    );
    assert_eq!(
        (looks(".git/config"), looks(".git/hooks")),
        before,
        "{}",
        show(&out)
    );
}

/// Attack: a hook of a repository made in the call, made executable through `/proc`
/// (`/proc/$$/fd/3` of a descriptor open on it, `/proc/self/cwd/…`), or given an ACL
/// that way. Should fail: nothing in a hooks directory becomes executable.
#[test]
fn redteam_a_hook_cannot_be_made_executable_through_proc() {
    let env = TestEnv::new();
    let out = env.sh(
        "workspace-write",
        "git init -q inner; h=inner/.git/hooks/pre-commit; printf '#!/bin/sh\\n' > $h; \
         exec 3<$h; chmod +x /proc/$$/fd/3; chmod +x /proc/self/cwd/$h; \
         chmod +x /proc/self/task/$$/fd/3; setfacl -m u::rwx /proc/$$/fd/3 2>/dev/null; echo done",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "done",
        "{}",
        show(&out)
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.ws.join("inner/.git/hooks/pre-commit"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0, "{mode:o}: {}", show(&out));
}
