//! The command line as a newcomer meets it: the forms `--help` lists, flags before a
//! subcommand, the preset table, shell completions of every closed-set value, and the
//! message (and marker) of each way a call can be refused before anything runs.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use support::*;

/// A call that prints `ran` when it runs at all: what each refusal must prevent.
const UNCONFINED_ECHO: [&str; 6] = [
    "--sandbox",
    "full-access",
    "--",
    "/bin/sh",
    "-c",
    "echo ran",
];

/// A home directory nobody may look into (mode 000), with a user configuration directory
/// inside; opened again when dropped, so that the test directory can be removed even when
/// the test fails.
struct LockedHome(std::path::PathBuf);

impl LockedHome {
    fn new(env: &TestEnv, name: &str) -> LockedHome {
        let home = env.root.join(name);
        std::fs::create_dir_all(home.join(".config/sandgate")).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o000)).unwrap();
        LockedHome(home)
    }
}

impl Drop for LockedHome {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}

/// sandgate in a fresh test environment, with no flags of its own.
fn bare(env: &TestEnv) -> Command {
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws);
    cmd
}

/// The one marker of a refused call, after asserting its exit status and that stderr says
/// `message` both in sandgate's own line and in the marker.
fn refusal(out: &Output, status: i32, message: &str) -> Value {
    assert_status(out, status);
    let markers = stderr_markers(out);
    assert_eq!(markers.len(), 1, "{}", show(out));
    let marker = markers[0].clone();
    let text = marker["message"].as_str().unwrap_or_default();
    assert!(
        text.contains(message),
        "marker lacks {message:?}: {}",
        show(out)
    );
    // sandgate's own line, or clap's for a command line it refused.
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .any(
                |l| (l.starts_with("sandgate: ") || l.starts_with("error: "))
                    && !l.starts_with("sandgate: denied ")
                    && l.contains(message)
            ),
        "no plain line says {message:?}: {}",
        show(out)
    );
    marker
}

#[test]
fn flags_before_a_subcommand_are_the_subcommands_own() {
    let env = TestEnv::new();
    for args in [
        &["--preset", "locked", "presets", "--json"][..],
        &["presets", "--preset", "locked", "--json"],
        &["--preset=locked", "presets", "--json"],
    ] {
        let out = output(bare(&env).args(args));
        assert_status(&out, 0);
        let table: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", show(&out)));
        assert_eq!(table["current"]["preset"], "locked", "{args:?}");
    }
    // The text form stars the current row.
    let out = output(bare(&env).args(["--preset", "locked", "presets"]));
    assert_status(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let starred: Vec<&str> = stdout.lines().filter(|l| l.starts_with('*')).collect();
    assert_eq!(starred.len(), 1, "{stdout}");
    assert!(
        starred[0].split_whitespace().nth(1) == Some("locked"),
        "{stdout}"
    );

    // A flag the subcommand does not take is a usage error naming it, and runs nothing.
    let out = output(bare(&env).args(["--no-observe", "doctor"]));
    refusal(&out, 64, "'--no-observe'");
    // A program named like a subcommand runs after `--`.
    let bin = env.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let program = bin.join("presets");
    std::fs::write(&program, "#!/bin/sh\necho the program ran\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = output(
        bare(&env)
            .args(["--sandbox", "full-access", "--", "presets"])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display())),
    );
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "the program ran\n");
}

#[test]
fn the_preset_table_has_whitespace_between_every_column() {
    let env = TestEnv::new();
    let json = output(bare(&env).args(["presets", "--json"]));
    assert_status(&json, 0);
    let table: Value = serde_json::from_slice(&json.stdout).unwrap();
    let text = output(bare(&env).arg("presets"));
    assert_status(&text, 0);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let rows = table["presets"].as_array().cloned().unwrap_or_default();
    assert!(rows.len() >= 5, "{table}");
    for row in rows {
        let cells: Vec<String> = ["key", "mode", "approval"]
            .iter()
            .map(|k| row[*k].as_str().unwrap_or_default().to_owned())
            .collect();
        let line = text
            .lines()
            .find(|l| l[1..].split_whitespace().next() == Some(cells[0].as_str()))
            .unwrap_or_else(|| panic!("no row for {}:\n{text}", cells[0]));
        // Key, mode and approval are whole words, the description follows after a gap.
        let words: Vec<&str> = line[1..].split_whitespace().take(3).collect();
        assert_eq!(words, cells, "{line:?}");
        let description = row["description"].as_str().unwrap_or_default();
        let at = line.find(description).unwrap_or_else(|| panic!("{line:?}"));
        assert!(line[..at].ends_with("  "), "{line:?}");
    }
}

#[test]
fn help_shows_every_way_to_run_a_command() {
    for flag in ["-h", "--help"] {
        let out = output(Command::new(sandgate()).arg(flag));
        assert_status(&out, 0);
        let help = String::from_utf8_lossy(&out.stdout);
        for form in [
            "-- CMD",
            "-c CMDSTRING",
            "SCRIPT",
            "-s",
            "prefix CMDSTRING",
            "<COMMAND>",
            "presets",
            "doctor",
        ] {
            assert!(help.contains(form), "{flag} lacks {form:?}:\n{help}");
        }
    }
}

/// What bash's completion offers after `words` (the last one being completed), with the
/// script `sandgate completions bash` prints.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let script = output(Command::new(sandgate()).args(["completions", "bash"]));
    assert_status(&script, 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sandgate.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let driver = format!(
        r#"source '{}'
COMP_WORDS=({})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
_sandgate sandgate "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        file.display(),
        quoted.join(" ")
    );
    let out = output(Command::new("bash").args(["--norc", "--noprofile", "-c", &driver]));
    assert_status(&out, 0);
    // Values only: where a subcommand's operand is completed, its flags are offered too.
    let mut offered: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty() && (words.len() == 2 || !l.starts_with('-')))
        .collect();
    offered.sort();
    offered
}

fn sorted(values: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = values.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

#[test]
fn bash_completes_the_values_of_every_closed_set_flag() {
    let modes = ["read-only", "workspace-write", "full-access"];
    assert_eq!(
        bash_completes(&["sandgate", "--sandbox", ""]),
        sorted(&modes)
    );
    // read-only is never a wider mode to ask for.
    assert_eq!(
        bash_completes(&["sandgate", "--sandbox-permissions", ""]),
        sorted(&modes[1..])
    );
    // A value that is not a path is not completed as one.
    for flag in ["--approval-timeout", "--justification", "--keep-env"] {
        assert_eq!(
            bash_completes(&["sandgate", flag, ""]),
            sorted(&[]),
            "{flag}"
        );
    }
    assert_eq!(
        bash_completes(&["sandgate", "--approval", ""]),
        sorted(&["on-request", "never"])
    );
    assert_eq!(
        bash_completes(&["sandgate", "--preset", ""]),
        sorted(&[
            "read-only",
            "workspace-write",
            "full-access",
            "ci",
            "locked"
        ])
    );
    assert_eq!(
        bash_completes(&["sandgate", "--sandbox", "w"]),
        sorted(&["workspace-write"])
    );
    assert_eq!(
        bash_completes(&["sandgate", "completions", ""]),
        sorted(&["bash", "elvish", "fish", "powershell", "zsh"])
    );
    let first = bash_completes(&["sandgate", ""]);
    for sub in [
        "doctor",
        "presets",
        "audit",
        "prefix",
        "tmp",
        "install-links",
    ] {
        assert!(
            first.iter().any(|w| w == sub),
            "{sub} not offered: {first:?}"
        );
    }
}

#[test]
fn fish_and_zsh_completions_offer_the_same_values() {
    // fish answers a completion query itself. (The script clap_complete writes completes a
    // value after `--flag=`; after `--flag ` fish's argparse, which it runs first, stops at
    // the missing value.)
    let script = output(Command::new(sandgate()).args(["completions", "fish"]));
    assert_status(&script, 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sandgate.fish");
    std::fs::write(&file, &script.stdout).unwrap();
    let query = |line: &str| {
        let out = output(Command::new("fish").env("HOME", dir.path()).args([
            "--no-config",
            "-c",
            &format!("source '{}'; complete -C '{line}'", file.display()),
        ]));
        assert_status(&out, 0);
        let mut words: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split('\t').next())
            .filter_map(|w| w.split_once('=').map(|(_, value)| value.to_owned()))
            .collect();
        words.sort();
        words
    };
    assert_eq!(
        query("sandgate --sandbox="),
        sorted(&["read-only", "workspace-write", "full-access"])
    );
    assert_eq!(
        query("sandgate --approval="),
        sorted(&["on-request", "never"])
    );

    // zsh: the script parses, and each flag's action lists exactly its values.
    let script = output(Command::new(sandgate()).args(["completions", "zsh"]));
    assert_status(&script, 0);
    let file = dir.path().join("_sandgate");
    std::fs::write(&file, &script.stdout).unwrap();
    let out = output(Command::new("zsh").arg("-n").arg(&file));
    assert_status(&out, 0);
    let text = String::from_utf8_lossy(&script.stdout);
    for (flag, values) in [
        (
            "--sandbox=",
            ":MODE:(read-only workspace-write full-access)'",
        ),
        ("--approval=", ":POLICY:(on-request never)'"),
        (
            "--preset=",
            ":KEY:(read-only workspace-write full-access ci locked)'",
        ),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("'{flag}")) && l.contains(values)),
            "{flag} does not offer {values}"
        );
    }
}

#[test]
fn a_usage_error_prints_a_marker() {
    let env = TestEnv::new();
    let out = output(bare(&env).args(["--sandbox", "bogus", "--", "true"]));
    let marker = refusal(&out, 64, "invalid value 'bogus' for '--sandbox <MODE>'");
    assert_eq!(marker["kind"], "usage");
    let out = output(bare(&env).args(["--bogus", "--", "true"]));
    refusal(&out, 64, "unexpected argument '--bogus'");
    // Asking for help is not a refusal.
    let out = output(bare(&env).arg("--help"));
    assert_status(&out, 0);
    assert!(stderr_markers(&out).is_empty(), "{}", show(&out));
}

#[test]
fn a_zero_or_endless_approval_timeout_is_refused() {
    let env = TestEnv::new();
    let run = |value: &str, via_env: bool| {
        let mut cmd = bare(&env);
        if via_env {
            cmd.env("SANDGATE_APPROVAL_TIMEOUT", value);
        } else {
            cmd.args(["--approval-timeout", value]);
        }
        cmd.args(UNCONFINED_ECHO);
        output(&mut cmd)
    };
    for via_env in [false, true] {
        let out = run("0", via_env);
        refusal(&out, 64, "0 seconds would cancel every request");
        assert!(out.stdout.is_empty(), "{}", show(&out));
        let out = run("18446744073709551615", via_env);
        refusal(&out, 64, "at most 86400 seconds");
        assert!(out.stdout.is_empty(), "{}", show(&out));
    }
    let out = run("1", false);
    assert_status(&out, 0);
}

#[test]
fn no_approval_channel_is_said_once_with_both_ways_to_get_one() {
    let env = TestEnv::new();
    let out = output(bare(&env).args([
        "--no-tty",
        "--sandbox",
        "read-only",
        "--sandbox-permissions",
        "workspace-write",
        "--justification",
        "write the build output",
        "--",
        "/bin/sh",
        "-c",
        "echo ran",
    ]));
    let marker = refusal(&out, 77, "--approval-endpoint or --approver");
    assert_eq!(marker["kind"], "approval_unavailable");
    // The mode the command would have run at, and the one it asked for.
    assert_eq!(marker["mode"], "read-only");
    assert_eq!(marker["requested"], "workspace-write");
    let message = marker["message"].as_str().unwrap_or_default();
    assert_eq!(
        message.matches("no approval channel is available").count(),
        1,
        "{message}"
    );
    assert!(out.stdout.is_empty(), "{}", show(&out));
}

#[test]
fn verifying_a_missing_audit_log_says_it_cannot_be_read() {
    let env = TestEnv::new();
    let verify =
        |log: &std::path::Path| output(bare(&env).args(["audit", "verify", "--log"]).arg(log));
    let missing = env.root.join("no-such-audit.jsonl");
    let out = verify(&missing);
    let marker = refusal(
        &out,
        1,
        &format!("there is no audit log at {}", missing.display()),
    );
    assert_eq!(marker["kind"], "audit_unreadable");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("write"),
        "{}",
        show(&out)
    );
    // One that is there but cannot be read says that.
    let out = verify(&env.ws);
    let marker = refusal(
        &out,
        1,
        &format!("cannot read the audit log {}", env.ws.display()),
    );
    assert_eq!(marker["kind"], "audit_unreadable");
    // A log that reads but was edited says so with its own kind.
    std::fs::write(&missing, "{\"prev\":\"forged\"}\n").unwrap();
    let marker = refusal(&verify(&missing), 1, "is broken at line 1");
    assert_eq!(marker["kind"], "audit_broken");
    // Without --log, a configuration that cannot be read is said as a run says it.
    let locked = LockedHome::new(&env, "locked-home");
    let home = &locked.0;
    let mut cmd = bare(&env);
    cmd.env_remove("SANDGATE_CONFIG_DIR")
        .env_remove("SANDGATE_AUDIT_LOG")
        .env("HOME", home)
        .args(["audit", "verify"]);
    let out = output(&mut bound_by_file_modes(cmd));
    refusal(&out, 78, &format!("HOME={}", home.display()));
}

#[test]
fn sandgates_own_state_directory_is_refused_as_a_workspace_or_writable_root() {
    let env = TestEnv::new();
    // Every workspace's private temp, cache layers and the hidden-files scan's cache lie
    // there: a sandbox that could write it could change what later calls trust.
    let out = output(
        Command::new(sandgate())
            .args(["tmp", "--workspace"])
            .arg(&env.ws),
    );
    assert_status(&out, 0);
    let state = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let state = state.parent().unwrap_or(Path::new("/")).to_path_buf();
    std::fs::create_dir_all(&state).unwrap();
    let shown = state.display().to_string();
    for flags in [vec!["--workspace", &shown], vec!["--writable-root", &shown]] {
        let out = output(bare(&env).args(&flags).args(["--", "true"]));
        refusal(&out, 78, "it holds sandgate's own state");
    }
}

#[test]
fn the_root_workspace_is_refused_with_advice_that_fits_how_it_was_chosen() {
    let env = TestEnv::new();
    let out = output(bare(&env).args(["--workspace", "/", "--", "true"]));
    let marker = refusal(&out, 78, "refusing / as the workspace");
    let message = marker["message"].as_str().unwrap_or_default();
    assert!(!message.contains("--workspace DIR"), "{message}");
    assert!(
        message.contains("name the project's directory"),
        "{message}"
    );
    // The refusal holds under full-access too, so the advice must not offer that way out.
    let out =
        output(bare(&env).args(["--sandbox", "full-access", "--workspace", "/", "--", "true"]));
    refusal(&out, 78, "refusing / as the workspace");
    assert!(
        !message.contains("run with --sandbox full-access"),
        "{message}"
    );

    let mut cmd = bare(&env);
    cmd.current_dir("/").args(["--", "true"]);
    let marker = refusal(&output(&mut cmd), 78, "(the current directory)");
    let message = marker["message"].as_str().unwrap_or_default();
    assert!(message.contains("pass --workspace DIR"), "{message}");
}

#[test]
fn a_directory_given_as_the_command_is_named_as_one() {
    let env = TestEnv::new();
    for mode in ["workspace-write", "full-access"] {
        let out = output(bare(&env).args(["--sandbox", mode, "--"]).arg(&env.outside));
        let marker = refusal(&out, 126, "Is a directory");
        assert_eq!(marker["kind"], "not_executable", "{mode}");
    }
    // A file without execute permission still says so.
    let file = env.ws.join("data.txt");
    std::fs::write(&file, "x").unwrap();
    let out = output(
        bare(&env)
            .args(["--sandbox", "full-access", "--"])
            .arg(&file),
    );
    refusal(&out, 126, "Permission denied");
}

/// Whether the command is a directory is the sandbox's answer, not the host's: `/tmp` is
/// the sandbox's own, and a name that is a directory on the host may be a plain file there.
#[test]
fn a_directory_is_named_as_the_sandbox_sees_it() {
    let env = TestEnv::new();
    let name = format!("/tmp/sandgate-isdir-{}", std::process::id());
    let out = output(
        bare(&env)
            .args(["--sandbox", "workspace-write", "--workspace"])
            .arg(&env.ws)
            .args(["--", "/bin/sh", "-c", &format!("echo data > {name}")]),
    );
    assert_status(&out, 0);
    std::fs::create_dir(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
    let out = output(
        bare(&env)
            .args(["--sandbox", "workspace-write", "--workspace"])
            .arg(&env.ws)
            .args(["--", &name]),
    );
    let _ = std::fs::remove_dir(&name);
    let mut clean = bare(&env);
    let _ = output(clean.args(["tmp", "--clean", "--workspace"]).arg(&env.ws));
    refusal(&out, 126, "Permission denied");
    // Control: the sandbox's own directory is named as one.
    let dir = env.ws.join("a-dir");
    std::fs::create_dir(&dir).unwrap();
    let out = output(
        bare(&env)
            .args(["--sandbox", "workspace-write", "--workspace"])
            .arg(&env.ws)
            .arg("--")
            .arg(&dir),
    );
    refusal(&out, 126, "Is a directory");
}

#[test]
fn an_unreadable_home_names_home_and_the_way_around_it() {
    let env = TestEnv::new();
    let locked = LockedHome::new(&env, "someone-elses-home");
    let home = locked.0.clone();
    let call_with_home = |home: &std::path::Path, config_dir: Option<&std::path::Path>| {
        let mut cmd = bare(&env);
        // The workspace named: one derived from a repository around the test directory
        // would hold this home, and be refused for that before any configuration is read.
        cmd.env_remove("SANDGATE_CONFIG_DIR")
            .env("HOME", home)
            .arg("--workspace")
            .arg(&env.ws)
            .args(UNCONFINED_ECHO);
        if let Some(dir) = config_dir {
            cmd.env("SANDGATE_CONFIG_DIR", dir);
        }
        output(&mut bound_by_file_modes(cmd))
    };
    let call = |config_dir: Option<&std::path::Path>| call_with_home(&home, config_dir);
    // A home beneath it cannot even be told to exist: its user file is as unreadable, not
    // absent, and the call is refused the same way rather than run without it.
    let beneath = home.join("sub");
    let out = call_with_home(&beneath, None);
    refusal(&out, 78, &format!("HOME={}", beneath.display()));
    let out = call(None);
    let marker = refusal(&out, 78, &format!("HOME={}", home.display()));
    let message = marker["message"].as_str().unwrap_or_default();
    assert!(message.contains("SANDGATE_CONFIG_DIR"), "{message}");
    assert!(!message.contains("invalid configuration"), "{message}");
    assert!(out.stdout.is_empty(), "{}", show(&out));
    // Pointed at a readable directory, the same call runs.
    let out = call(Some(&env.root.join("config")));
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
}

/// `sandgate ls` reads `ls` as a script (bash's `bash ls`), which bash refuses as a binary:
/// sandgate says how to run the program instead. Through a link sandgate is bash and says
/// what bash says.
#[test]
fn a_program_given_as_a_script_is_refused_with_the_way_to_run_it() {
    let env = TestEnv::new();
    let out = output(bare(&env).args(["--sandbox", "read-only", "ls", "/"]));
    let marker = refusal(&out, 126, "a program, not a shell script");
    assert_eq!(marker["kind"], "not_executable");
    assert!(
        marker["message"]
            .as_str()
            .unwrap_or_default()
            .contains("sandgate [FLAGS] -- ls"),
        "{marker}"
    );
    assert!(out.stdout.is_empty(), "{}", show(&out));
    // The way it names runs the program.
    let out = output(bare(&env).args(["--sandbox", "read-only", "--", "ls", "/"]));
    assert_status(&out, 0);
    // A script of that name in the current directory is a script.
    std::fs::write(env.ws.join("ls"), "echo the script\n").unwrap();
    let out = output(bare(&env).args(["--sandbox", "read-only", "ls"]));
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "the script\n");
    std::fs::remove_file(env.ws.join("ls")).unwrap();
    // Through a link: bash's own refusal, and no sandgate line.
    let sh = install_links(&env).join("sandgate-sh");
    let out = output(env.command(&sh).arg("ls"));
    assert_status(&out, 126);
    assert!(stderr_markers(&out).is_empty(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot execute binary file"),
        "{}",
        show(&out)
    );
}

#[test]
fn a_refused_subcommand_prints_a_marker() {
    let env = TestEnv::new();
    let out = output(bare(&env).args(["--preset", "custom", "presets"]));
    let marker = refusal(&out, 64, "cannot be selected");
    assert_eq!(marker["kind"], "usage");
    let out = output(bare(&env).args(["tmp", "--workspace", "/"]));
    refusal(&out, 78, "refusing / as the workspace");
}

/// `sandgate explain --json` with `args`, in `env` with a home of the test's own (holding a
/// cargo registry and an `.npmrc`), a clean environment but for one secret variable, and
/// the test's root written `$ROOT`. Of the lists that reach beyond the test (every home of
/// the caller's uid, sandgate's view of `/etc`), only what lies beneath the root is kept:
/// what the test itself controls.
fn explained(env: &TestEnv, args: &[&str], nested_in: Option<&str>) -> Value {
    let home = env.root.join("home");
    std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
    std::fs::write(home.join(".npmrc"), "//registry.npmjs.org/:_authToken=x\n").unwrap();
    let mut cmd = Command::new(sandgate());
    cmd.env_clear();
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home)
        .env("GITHUB_TOKEN", "not-for-the-command");
    if let Some(mode) = nested_in {
        cmd.args(["--sandbox", mode, "--workspace"])
            .arg(&env.ws)
            .arg("--")
            .arg(sandgate());
    }
    cmd.args(["explain", "--json", "--workspace"])
        .arg(&env.ws)
        .args(args);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    let root = env.root.display().to_string();
    let text = String::from_utf8_lossy(&out.stdout).replace(&root, "$ROOT");
    let mut value: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    let ours = |v: &Value| v.as_str().is_some_and(|s| s.starts_with("$ROOT"));
    let keep_ours = |plan: &mut Value| {
        if let Some(hidden) = plan.get_mut("hidden").and_then(Value::as_array_mut) {
            hidden.retain(|h| ours(&h["path"]));
        }
        if let Some(caches) = plan.get_mut("caches").and_then(Value::as_array_mut) {
            caches.retain(ours);
        }
    };
    keep_ours(&mut value["plan"]);
    if let Some(plan) = value
        .get_mut("request")
        .and_then(|r| r.get_mut("plan_if_allowed"))
    {
        keep_ours(plan);
    }
    value
}

/// The restricted plan fields every golden plan below shares, with what differs.
fn restricted(mode: &str, writable: &[&str], tmp: &str, network: &str, caches: bool) -> Value {
    let caches: Vec<String> = if caches {
        [
            ".cargo/.global-cache",
            ".cargo/.package-cache",
            ".cargo/.package-cache-mutate",
            ".cargo/git",
            ".cargo/registry",
            ".npm",
        ]
        .iter()
        .map(|c| format!("$ROOT/home/{c}"))
        .collect()
    } else {
        vec![]
    };
    serde_json::json!({
        "mode": mode,
        "confined": true,
        "cwd": "$ROOT/ws",
        "tmpdir": "/tmp",
        "writable": writable,
        "protected": [],
        "git_dirs": [],
        "frozen": [],
        "hidden": [
            {"path": "$ROOT/config", "why": {"reason": "own"}},
            {"path": "$ROOT/home/.npmrc", "why": {"reason": "listed", "entry": "$HOME/.npmrc"}},
            {"path": "$ROOT/state/audit.jsonl", "why": {"reason": "own"}},
        ],
        "private_tmp": tmp,
        "sockets": [],
        "network": network,
        "hosts_allowed": if network == "proxy" { vec!["example.com:443"] } else { vec![] },
        "hosts_denied": [],
        "caches": caches,
        "env_withheld": ["GITHUB_TOKEN"],
    })
}

fn standing(mode: &str, preset: &str, approval: &str) -> Value {
    serde_json::json!({
        "mode": mode, "preset": preset, "approval": approval,
        "max_mode": null, "timeout_secs": null, "keep_background": false,
    })
}

#[test]
fn explain_pins_a_read_only_plan() {
    let env = TestEnv::new();
    let got = explained(&env, &["--sandbox", "read-only", "--", "ls", "-l"], None);
    let want = serde_json::json!({
        "command": ["ls", "-l"],
        "workspace": "$ROOT/ws",
        "standing": standing("read-only", "read-only", "on-request"),
        "nested_in": null,
        "backend": "namespaces",
        "unenforced": [],
        "plan": restricted("read-only", &[], "per-call", "none", false),
        "request": null,
    });
    assert_eq!(got, want, "{got:#}");
}

#[test]
fn explain_pins_a_workspace_write_plan_with_hosts_roots_and_caches() {
    let env = TestEnv::new();
    let root = env.outside.display().to_string();
    let got = explained(
        &env,
        &[
            "--sandbox",
            "workspace-write",
            "--allow-host",
            "example.com:443",
            "--writable-root",
            &root,
            "--",
            "make",
        ],
        None,
    );
    let want = serde_json::json!({
        "command": ["make"],
        "workspace": "$ROOT/ws",
        "standing": standing("workspace-write", "workspace-write", "on-request"),
        "nested_in": null,
        "backend": "namespaces",
        "unenforced": [],
        "plan": restricted("workspace-write", &["$ROOT/outside", "$ROOT/ws"], "per-workspace", "proxy", true),
        "request": null,
    });
    assert_eq!(got, want, "{got:#}");
}

#[test]
fn explain_pins_who_is_asked_for_a_request_and_the_plan_if_allowed() {
    let env = TestEnv::new();
    let directive =
        "# sandgate: sandbox_permissions=workspace-write justification=\"build it\"\nmake";
    let got = explained(
        &env,
        &[
            "--sandbox",
            "read-only",
            "--approver",
            "cat",
            "-c",
            directive,
        ],
        None,
    );
    let want = serde_json::json!({
        "command": ["/bin/bash", "-c", "make"],
        "workspace": "$ROOT/ws",
        "standing": standing("read-only", "read-only", "on-request"),
        "nested_in": null,
        "backend": "namespaces",
        "unenforced": [],
        "plan": restricted("read-only", &[], "per-call", "none", false),
        "request": {
            "mode": "workspace-write",
            "justification": "build it",
            "asked": "the approver program \"cat\"",
            "refused": null,
            "plan_if_allowed": restricted("workspace-write", &["$ROOT/ws"], "per-workspace", "none", true),
        },
    });
    assert_eq!(got, want, "{got:#}");
}

#[test]
fn explain_inside_a_sandbox_says_a_request_is_refused_unasked() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let got = explained(
        &env,
        &[
            "--sandbox-permissions",
            "full-access",
            "--justification",
            "docker",
            "--",
            "make",
        ],
        Some("workspace-write"),
    );
    assert_eq!(got["nested_in"], "workspace-write", "{got:#}");
    assert_eq!(got["plan"]["mode"], "workspace-write", "{got:#}");
    assert_eq!(got["request"]["mode"], "full-access", "{got:#}");
    assert_eq!(got["request"]["asked"], Value::Null, "{got:#}");
    assert_eq!(got["request"]["plan_if_allowed"], Value::Null, "{got:#}");
    let refused = got["request"]["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("inside a workspace-write sandbox"),
        "{got:#}"
    );
}

#[test]
fn explain_runs_nothing_and_reads_as_text() {
    let env = TestEnv::new();
    let mut cmd = bare(&env);
    cmd.args(["explain", "--sandbox", "read-only", "--", "touch"])
        .arg(env.ws.join("ran"));
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert!(!env.ws.join("ran").exists(), "explain ran the command");
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "runs as read-only:",
        "  writable:   (none)",
        "  network:    none",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in {text}");
    }
}

/// Where the kernel lacks a layer, explain refuses as the run would (78, naming it), and
/// with `--allow-degraded=NAME,…` lists it as unenforced, in the text too.
#[test]
fn explain_says_what_a_degraded_run_would_lack() {
    let env = TestEnv::new();
    let explain = |extra: &[&str]| {
        let mut cmd = bare(&env);
        cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", "landlock")
            .args(["explain", "--sandbox", "read-only"])
            .args(extra)
            .args(["--", "true"]);
        output(&mut cmd)
    };
    let out = explain(&["--json"]);
    let marker = refusal(&out, 78, "read-only outside");
    assert_eq!(marker["kind"], "unenforceable");
    assert!(out.stdout.is_empty(), "{}", show(&out));

    let named = "--allow-degraded=read-only-outside,scopes";
    let out = explain(&["--json", named]);
    assert_status(&out, 0);
    let got: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    let landlock = ["read-only-outside", "scopes"];
    assert_eq!(got["unenforced"], serde_json::json!(landlock), "{got:#}");
    assert_eq!(got["backend"], "namespaces", "{got:#}");
    assert_eq!(got["plan"]["confined"], true, "{got:#}");

    let out = explain(&[named]);
    assert_status(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = "degraded:   without read-only-outside, scopes (--allow-degraded)";
    assert!(text.lines().any(|l| l == line), "{text}");
}

/// Under the landlock backend explain says so, and shows the TMPDIR the call gets (the
/// workspace's private temp) and no copy-on-write cache; unnamed, it refuses as a run does.
#[test]
fn explain_shows_the_landlock_backend_as_it_runs() {
    let env = TestEnv::new();
    let explain = |extra: &[&str]| {
        let mut cmd = bare(&env);
        cmd.args([
            "explain",
            "--json",
            "--backend",
            "landlock",
            "--sandbox",
            "workspace-write",
        ])
        .args(extra)
        .args(["--", "true"]);
        output(&mut cmd)
    };
    let out = explain(&[]);
    assert_status(&out, 0);
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["backend"], "landlock", "{got:#}");
    assert_eq!(got["unenforced"], serde_json::json!([]));
    let tmpdir = got["plan"]["tmpdir"].as_str().unwrap_or_default();
    assert!(tmpdir.starts_with("/tmp/sandgate-"), "{got:#}");
    assert_eq!(got["plan"]["caches"], serde_json::json!([]), "{got:#}");
}

/// A request an agent's wrapper carries (its options guard, then the model's command handed
/// to `eval` as one quoted word) is found where a run finds it; a directive followed by
/// what the shell would read as an option is refused as a run refuses it.
#[test]
fn explain_finds_a_wrapped_request_and_refuses_what_a_run_refuses() {
    let env = TestEnv::new();
    let wrapped = "shopt -u extglob 2>/dev/null || true && eval '# sandgate: sandbox_permissions=workspace-write justification=\"build it\"\nmake' < /dev/null";
    let got = explained(
        &env,
        &["--sandbox", "read-only", "--approver", "cat", "-c", wrapped],
        None,
    );
    assert_eq!(got["request"]["mode"], "workspace-write", "{got:#}");
    assert_eq!(got["request"]["justification"], "build it", "{got:#}");
    let mut cmd = bare(&env);
    cmd.args([
        "explain",
        "--sandbox",
        "read-only",
        "-c",
        "# sandgate: sandbox_permissions=workspace-write justification=\"x\"\n-rf",
    ]);
    let out = output(&mut cmd);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("option"),
        "{}",
        show(&out)
    );
}
