//! [`check_replacement`] against hand-written texts, against git's own parser on the same
//! inputs (a differential test), and against every configuration git writes in the
//! workflows a sandboxed command runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::parse::{parse, Entry};
use super::*;

#[track_caller]
fn refused_for(old: Option<&str>, new: &str) -> String {
    match check_replacement(old.map(str::as_bytes), new.as_bytes()) {
        Err(Refusal::Names { key }) => key,
        other => panic!("{new:?} over {old:?}: {other:?}"),
    }
}

#[track_caller]
fn accepted(old: Option<&str>, new: &str) {
    if let Err(e) = check_replacement(old.map(str::as_bytes), new.as_bytes()) {
        panic!("{new:?} over {old:?}: {e}");
    }
}

const USER: &str = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"my-hook\"\n\
                    [alias]\n\tlg = !git log --oneline\n\tst = status\n\
                    [include]\n\tpath = a.inc\n\tpath = b.inc\n";

#[test]
fn a_new_file_may_name_no_program() {
    accepted(
        None,
        "[core]\n\tbare = false\n[user]\n\temail = a@example.com\n",
    );
    assert_eq!(
        refused_for(None, "[core]\n\tbare = false\n\tFSMonitor = x\n"),
        "core.fsmonitor"
    );
    assert_eq!(
        refused_for(None, "[Diff \"Pdf\"]\n\tTextConv = x\n"),
        "diff.Pdf.textconv"
    );
}

#[test]
fn the_users_own_entries_are_kept() {
    // `git remote add` rewrites the file with every old entry in place.
    let added = format!("{USER}[remote \"origin\"]\n\turl = /srv/r.git\n");
    accepted(Some(USER), &added);
    // Order and header spelling do not matter; the canonical name and value do.
    accepted(
        Some(USER),
        "[INCLUDE]\n\tpath = b.inc\n[core]\n\tFsmonitor = my-hook\n[include]\n\tpath = a.inc\n",
    );
    // A program-naming entry may be removed.
    accepted(Some(USER), "[core]\n\trepositoryformatversion = 0\n");
}

#[test]
fn changing_or_adding_a_program_is_refused() {
    let changed = USER.replace("my-hook", "touch /tmp/x");
    assert_eq!(refused_for(Some(USER), &changed), "core.fsmonitor");
    let twice = format!("{USER}[include]\n\tpath = a.inc\n");
    assert_eq!(refused_for(Some(USER), &twice), "include.path");
    let bang = USER.replace("st = status", "st = !sh");
    assert_eq!(refused_for(Some(USER), &bang), "alias.st");
    // A key alone is not the same as `key = true`.
    assert_eq!(
        refused_for(
            Some("[filter \"f\"]\n\trequired\n"),
            "[filter \"f\"]\n\trequired = true\n"
        ),
        "filter.f.required"
    );
    // Subsections are compared exactly.
    assert_eq!(
        refused_for(
            Some("[remote \"origin\"]\n\tuploadpack = up\n"),
            "[remote \"Origin\"]\n\tuploadpack = up\n"
        ),
        "remote.Origin.uploadpack"
    );
    // An entry moved from the old `config` to a new section of the same name elsewhere
    // is still the same entry; one moved to another key is not.
    assert_eq!(
        refused_for(Some(USER), "[core]\n\tpager = my-hook\n"),
        "core.pager"
    );
}

#[test]
fn the_working_tree_stays_where_a_relative_hooks_path_is_found() {
    let hooks = "[core]\n\thooksPath = .githooks\n";
    let moved = format!("{hooks}\tworktree = /tmp/evil\n");
    assert!(refused_for(Some(hooks), &moved).contains("core.worktree"));
    let elsewhere = format!("{hooks}\tworktree = /srv/other\n");
    assert!(refused_for(Some(&moved), &elsewhere).contains("core.worktree"));
    accepted(Some(&moved), &moved);
    // What git itself writes for a submodule, and a hooks path that does not move.
    accepted(
        Some("[core]\n\tbare = false\n"),
        "[core]\n\tbare = false\n\tworktree = ../../../sub\n",
    );
    let absolute = "[core]\n\thooksPath = /srv/hooks\n";
    accepted(Some(absolute), &format!("{absolute}\tworktree = /tmp/x\n"));
    // Split across the two files git reads, and in a config.worktree of its own.
    let plain = "[core]\n\tbare = false\n";
    let moved = format!("{plain}\tworktree = /tmp/evil\n");
    let beside = File::Config {
        worktree: Some(hooks.as_bytes()),
    };
    assert!(check_replacement_in(beside, Some(plain.as_bytes()), moved.as_bytes()).is_err());
    assert!(
        check_replacement_in(File::Worktree, None, b"[core]\n\tworktree = /tmp/evil\n").is_err()
    );
    assert_eq!(
        check_replacement_in(File::Worktree, None, b"[core]\n\tsparseCheckout = true\n"),
        Ok(())
    );
}

#[test]
fn an_unreadable_old_file_grants_nothing() {
    let broken = format!("{USER}[oops\n");
    assert!(check_replacement(Some(broken.as_bytes()), USER.as_bytes()).is_err());
    let huge = format!("{USER}#{}\n", "x".repeat(MAX_LEN));
    assert_eq!(refused_for(Some(&huge), USER), "core.fsmonitor");
    assert_eq!(
        refused_for(
            Some("[core]\n\tfsmonitor = x\0\n"),
            "[core]\n\tfsmonitor = x\n"
        ),
        "core.fsmonitor"
    );
}

#[test]
fn an_unreadable_or_huge_new_file_is_refused() {
    let e = check_replacement(None, b"[core]\n\tbare = \"false\n");
    let Err(Refusal::Unreadable { reason }) = &e else {
        panic!("{e:?}");
    };
    assert!(
        reason.contains("line 2") && reason.contains("quoted"),
        "{reason}"
    );
    assert!(matches!(
        check_replacement(Some(USER.as_bytes()), b"[core]\n\tfsmonitor = x\0"),
        Err(Refusal::Unreadable { .. })
    ));
    let huge = format!("[core]\n#{}\n", "x".repeat(MAX_LEN));
    assert_eq!(
        check_replacement(None, huge.as_bytes()),
        Err(Refusal::TooLarge)
    );
    let exactly = format!("#{}", "x".repeat(MAX_LEN - 1));
    assert_eq!(check_replacement(None, exactly.as_bytes()), Ok(()));
}

#[test]
fn refusals_say_what_to_do() {
    let names = Refusal::Names {
        key: "core.fsmonitor".into(),
    };
    assert!(names
        .to_string()
        .contains("`core.fsmonitor` names a program"));
    assert!(names.to_string().contains("outside the sandbox"));
    assert_eq!(names.key(), Some("core.fsmonitor"));
    assert!(Refusal::TooLarge.to_string().contains("1024 KiB"));
    assert_eq!(Refusal::TooLarge.key(), None);
}

// ---- Against git itself. ----

/// The git programs installed here, one per version: the one on `PATH` and the usual
/// places of a second. At least one is required.
fn gits() -> Vec<(PathBuf, (u32, u32))> {
    let mut found: Vec<(PathBuf, (u32, u32))> = vec![];
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("git")).collect())
        .unwrap_or_default();
    for git in on_path
        .into_iter()
        .chain(["/usr/bin/git", "/usr/local/bin/git"].map(PathBuf::from))
    {
        let Some(version) = version(&git) else {
            continue;
        };
        if !found.iter().any(|(_, v)| *v == version) {
            found.push((git, version));
        }
    }
    assert!(
        !found.is_empty(),
        "git is not installed: these tests compare the parser with it (scripts/test installs it)"
    );
    found
}

/// `git version 2.47.3` → (2, 47).
fn version(git: &Path) -> Option<(u32, u32)> {
    let out = Command::new(git).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut parts = text.split_whitespace().nth(2)?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// git with no configuration but what `home` and the arguments give it.
fn git(git: &Path, home: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(git);
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("LC_ALL", "C")
        .current_dir(dir);
    cmd
}

#[track_caller]
fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

type Listed = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// What `git config --list --null` says of `file`; `None` when git refuses it.
fn listed_by_git(git_path: &Path, home: &Path, file: &Path) -> Option<Listed> {
    let out = git(git_path, home, home)
        .args(["config", "--no-includes", "--null", "--list", "--file"])
        .arg(file)
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let mut records: Vec<&[u8]> = out.stdout.split(|&c| c == 0).collect();
    assert_eq!(records.pop(), Some(&b""[..]), "{:?}", out.stdout);
    Some(
        records
            .into_iter()
            .map(|r| match r.iter().position(|&c| c == b'\n') {
                Some(at) => (r[..at].to_vec(), Some(r[at + 1..].to_vec())),
                None => (r.to_vec(), None),
            })
            .collect(),
    )
}

fn listed(entries: &[Entry]) -> Listed {
    entries
        .iter()
        .map(|e| (e.name(), e.value.clone()))
        .collect()
}

/// git before 2.47 wrote every unquoted whitespace byte inside a value as a space; the
/// parser follows the newer git, which keeps the byte.
fn as_older_git(list: &Listed) -> Listed {
    let space = |v: &Vec<u8>| -> Vec<u8> {
        v.iter()
            .map(|&c| if c == b'\t' || c == b'\r' { b' ' } else { c })
            .collect()
    };
    list.iter()
        .map(|(n, v)| (n.clone(), v.as_ref().map(space)))
        .collect()
}

/// Inputs chosen to sit on the edges of git's syntax.
const TRICKY: &[&str] = &[
    "",
    "\n\n",
    "[a]k=v",
    "[a]\n\tk = v\n",
    "[A]K=v\n[a]k=w\n",
    "[a \"Sub\"]k=v",
    "[a.Sub]k=v",
    "[a.b.c]k=v",
    "[a \"x\\\"y\\\\z\\q\"]k=v",
    "[a\t\"t\"]k=v",
    "[a \"\"]k=v",
    "[a \"x\" ]k=v",
    "[a x]k=v",
    "[a \"x]k=v",
    "[a \"x\\\n\"]k=v",
    "[]k=v",
    "[a_b]k=v",
    "[-]k=v",
    "[1a]k=v",
    "[ \"x\"]k=v",
    "[a.b \"c\"]k=v",
    "[a..b]k=v",
    "[a.]k=v",
    "k=v",
    "[a]k",
    "[a]k\n",
    "[a]k ",
    "[a]k\t\n",
    "[a]k =",
    "[a]k = ",
    "[a]k ;c",
    "[a]k#c",
    "[a]k = v;c",
    "[a]k = v #c",
    "[a]k = \"v;c\"",
    "[a]k=\"\" x",
    "[a]k=\" \" x ",
    "[a]k=a  b  ",
    "[a]k=a\tb\t",
    "[a]k=a\rb",
    "[a]k=\"a\rb\"",
    "[a]k=v\r\n",
    "[a]\r\nk=v\r\n\r\n",
    "[a]\rk=v",
    "[a]k\r=v",
    "[a]k=\\n\\t\\b\\\\\\\"",
    "[a]k=\\q",
    "[a]k=\\\rx",
    "[a]k=a\\\nb",
    "[a]k=a \\\n  b",
    "[a]k=\"a\\\nb\"",
    "[a]k=v\\",
    "[a]k=\"v\\",
    "[a]k=\"open",
    "[a]k=\"open\nj=1",
    "[a]k=\"\"\"\"",
    "[a]1k=v",
    "[a]-k=v",
    "[a]k-1=v",
    "[a]k_1=v",
    "[a]k.x=v",
    "[a]k : v",
    "[a] k\t=\tv",
    "  [a]  k=v  ",
    "# c\n; c\n[a] # c\nk=v ; c",
    "[a]k=é ü",
    "[a \"é\"]k=v",
    "\u{feff}[a]k=v",
    "\u{feff}\u{feff}[a]k=v",
    "[a]k=1\n[b]\n[c]j=2",
    "[a]k=v\n[a]k=w\nk",
];

/// A deterministic stream of inputs made of fragments of git's syntax.
fn generated(count: usize) -> Vec<Vec<u8>> {
    const PARTS: &[&str] = &[
        "[a]",
        "[s \"X y\"]",
        "[s.T]",
        "[",
        "]",
        "\"",
        "\\",
        "\\n",
        "\\t",
        "\\b",
        "\\\"",
        "\\\\",
        "\\x",
        "\\\n",
        "\n",
        "\n",
        "\r\n",
        "\r",
        " ",
        " ",
        "\t",
        "#",
        ";",
        "=",
        " = ",
        "k",
        "Key-2",
        "v",
        "x y",
        ".",
        "é",
        "1",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..count)
        .map(|_| {
            let mut text = b"[a]\n".to_vec();
            for _ in 0..(next() % 14) {
                let part = PARTS[(next() % PARTS.len() as u64) as usize];
                text.extend_from_slice(part.as_bytes());
            }
            text
        })
        .collect()
}

/// The parser reads what git reads, as git reads it, and refuses what git refuses; the
/// only texts it refuses that git reads are those [`Problem::stricter_than_git`] names.
#[test]
fn the_parser_agrees_with_git() {
    let tmp = tempfile::tempdir().unwrap();
    let mut inputs: Vec<Vec<u8>> = TRICKY.iter().map(|t| t.as_bytes().to_vec()).collect();
    inputs.extend(generated(300));
    let gits = gits();
    let mut disagreements = vec![];
    let chunks: Vec<(usize, &[Vec<u8>])> = inputs.chunks(64).enumerate().collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|(n, chunk)| {
                let (gits, tmp) = (&gits, tmp.path());
                scope.spawn(move || {
                    let file = tmp.join(format!("config-{n}"));
                    let mut found = vec![];
                    for text in chunk {
                        std::fs::write(&file, text).unwrap();
                        let ours = parse(text);
                        for (git_path, version) in gits {
                            let theirs = listed_by_git(git_path, tmp, &file);
                            let agree = match (&ours, &theirs) {
                                (Err(e), _) if e.problem.stricter_than_git() => true,
                                (Err(_), None) => true,
                                (Ok(ours), Some(theirs)) => {
                                    let ours = listed(ours);
                                    ours == *theirs
                                        || (*version < (2, 47)
                                            && as_older_git(&ours) == as_older_git(theirs))
                                }
                                _ => false,
                            };
                            if !agree {
                                found.push(format!(
                                    "{:?}: ours {:?}, git {}.{} {:?}",
                                    String::from_utf8_lossy(text),
                                    ours.as_ref().map(|e| listed(e)),
                                    version.0,
                                    version.1,
                                    theirs
                                ));
                            }
                        }
                    }
                    found
                })
            })
            .collect();
        for handle in handles {
            disagreements.extend(handle.join().unwrap_or_else(|_| vec!["panicked".into()]));
        }
    });
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s) with git:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

/// Every `config` and `config.worktree` under `dir`, with its content.
fn configs(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(path);
            } else if ["config", "config.worktree"]
                .iter()
                .any(|n| entry.file_name() == *n)
            {
                out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

/// Runs each step with git and checks every configuration it wrote against the one it
/// replaced, as the supervisor would.
struct Workflow {
    git: PathBuf,
    root: PathBuf,
    checked: usize,
}

impl Workflow {
    /// A step the user takes outside the sandbox: not checked.
    fn outside(&self, dir: &str, args: &[&str]) {
        run(git(&self.git, &self.root, &self.root.join(dir)).args(args));
    }

    fn step(&mut self, dir: &str, args: &[&str]) {
        let before = configs(&self.root);
        let dir = self.root.join(dir);
        run(git(&self.git, &self.root, &dir)
            .args(["-c", "protocol.file.allow=always"])
            .args(args));
        for (path, new) in configs(&self.root) {
            let old = before.get(&path);
            if old == Some(&new) {
                continue;
            }
            self.checked += 1;
            if let Err(e) = check_replacement(old.map(Vec::as_slice), &new) {
                panic!(
                    "git {}: {} refused: {e}\n--- old\n{}--- new\n{}",
                    args.join(" "),
                    path.display(),
                    String::from_utf8_lossy(old.map_or(&b""[..], |o| o)),
                    String::from_utf8_lossy(&new)
                );
            }
        }
    }
}

/// The files git writes in the workflows a sandboxed command runs are all accepted —
/// also with the user's own program-naming entries in place, which they keep.
#[test]
fn what_git_writes_is_accepted() {
    for (git_path, _) in gits() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::write(
            root.join(".gitconfig"),
            "[user]\n\tname = t\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        let mut w = Workflow {
            git: git_path,
            root,
            checked: 0,
        };
        w.step(".", &["init", "-q", "--bare", "origin.git"]);
        w.step(".", &["init", "-q", "--bare", "--shared", "shared.git"]);
        w.step(".", &["init", "-q", "sub"]);
        w.step("sub", &["commit", "-q", "--allow-empty", "-m", "s"]);
        w.step(".", &["init", "-q", "repo"]);
        // The user's own settings, which later writes must keep.
        w.outside("repo", &["config", "core.fsmonitor", "false"]);
        w.outside("repo", &["config", "alias.lg", "!git log --oneline"]);
        w.outside("repo", &["config", "core.pager", "cat"]);
        w.outside("repo", &["config", "include.path", "missing.inc"]);
        w.step("repo", &["commit", "-q", "--allow-empty", "-m", "one"]);
        w.step("repo", &["remote", "add", "origin", "../origin.git"]);
        w.step("repo", &["config", "user.email", "other@example.com"]);
        w.step("repo", &["push", "-q", "-u", "origin", "main"]);
        w.step("repo", &["branch", "topic"]);
        w.step("repo", &["branch", "-u", "origin/main", "topic"]);
        w.step(
            "repo",
            &["checkout", "-q", "-b", "tracking", "--track", "origin/main"],
        );
        w.step("repo", &["remote", "set-url", "origin", "../origin.git"]);
        w.step("repo", &["remote", "rename", "origin", "upstream"]);
        let sub = w.root.join("sub").display().to_string();
        w.step("repo", &["submodule", "add", "-q", &sub, "sub"]);
        w.step("repo", &["commit", "-q", "-m", "sub"]);
        w.step("repo", &["submodule", "deinit", "-q", "-f", "sub"]);
        w.step("repo", &["submodule", "init", "-q"]);
        w.step("repo", &["submodule", "update", "-q", "--init"]);
        // A nested clone registered as it is, then its git directory moved under
        // `.git/modules` (git writes its `core.worktree`).
        w.step(".", &["clone", "-q", &sub, "repo/inner"]);
        w.step("repo", &["submodule", "add", "-q", &sub, "inner"]);
        w.step("repo", &["submodule", "absorbgitdirs"]);
        w.step("repo", &["config", "extensions.worktreeConfig", "true"]);
        w.step("repo", &["worktree", "add", "-q", "../wt", "-b", "wt"]);
        w.step(
            "wt",
            &["config", "--worktree", "core.sparseCheckout", "true"],
        );
        w.step("wt", &["sparse-checkout", "set", "--no-cone", "/*"]);
        // Values and subsections git has to quote or escape when it writes them.
        w.step(
            "repo",
            &["config", "user.name", " a;b#c \"q\" \\ \t tab\nline "],
        );
        w.step(
            "repo",
            &["config", "remote.we\"ird\\name.url", "/srv/r.git"],
        );
        w.step("repo", &["config", "--unset", "user.email"]);
        w.step("repo", &["remote", "remove", "upstream"]);
        w.step(".", &["clone", "-q", "origin.git", "clone"]);
        w.step(
            ".",
            &["clone", "-q", "--recurse-submodules", "repo", "clone2"],
        );
        w.step(
            ".",
            &[
                "-c",
                "uploadpack.allowFilter=true",
                "clone",
                "-q",
                "--no-local",
                "--filter=blob:none",
                "origin.git",
                "partial",
            ],
        );
        assert!(w.checked >= 25, "only {} configurations written", w.checked);
        let config = w.root.join("repo/.git/config");
        let ours = listed(&parse(&std::fs::read(&config).unwrap_or_default()).unwrap_or_default());
        assert_eq!(Some(ours), listed_by_git(&w.git, &w.root, &config));
        // The user's entries survived every step.
        let text = std::fs::read(w.root.join("repo/.git/config")).unwrap_or_default();
        let entries = listed(&parse(&text).unwrap());
        for (name, value) in [
            ("core.fsmonitor", "false"),
            ("alias.lg", "!git log --oneline"),
            ("include.path", "missing.inc"),
        ] {
            let wanted = (name.as_bytes().to_vec(), Some(value.as_bytes().to_vec()));
            assert!(entries.contains(&wanted), "{name} lost");
        }
    }
}

/// What `git config` writes for a program is refused, and changing the user's own is too.
#[test]
fn what_git_config_writes_for_a_program_is_refused() {
    for (git_path, _) in gits() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        run(git(&git_path, root, root).args(["init", "-q", "r"]));
        let config = root.join("r/.git/config");
        let mut old = std::fs::read(&config).unwrap_or_default();
        for (key, value) in [
            ("core.fsmonitor", "touch /tmp/x; false"),
            ("core.fsmonitor", "touch /tmp/y; false"),
            ("core.hooksPath", "/tmp/h"),
            ("alias.st", "!touch /tmp/x"),
            ("filter.x.clean", "touch /tmp/x; cat"),
            ("remote.o.url", "ext::sh -c touch% /tmp/x"),
        ] {
            run(git(&git_path, root, &root.join("r")).args(["config", key, value]));
            let new = std::fs::read(&config).unwrap_or_default();
            let refused = check_replacement(Some(&old), &new);
            assert_eq!(
                refused,
                Err(Refusal::Names {
                    key: key.to_lowercase()
                }),
                "{key} = {value}"
            );
            old = new;
        }
    }
}
