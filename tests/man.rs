//! The man page: the committed `man/sandgate.1` is what `scripts/gen-man` would write
//! today, it has every section a reader looks for, what those sections name is what the
//! code reads, and man-db renders it without a warning.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../man/page.rs"]
mod page;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/man/sandgate.1");

#[test]
fn committed_man_page_is_current() {
    let generated = page::render().unwrap_or_else(|e| panic!("rendering the page: {e}"));
    let committed = std::fs::read(PAGE).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    assert!(
        generated == committed,
        "man/sandgate.1 is stale: run scripts/gen-man"
    );
}

/// `MANWIDTH=80 man --warnings -l -P cat PAGE`: what a reader sees, and what groff warns.
fn man(page: &Path) -> Output {
    Command::new("man")
        .args(["--warnings", "-l", "-P", "cat"])
        .arg(page)
        .env("MANWIDTH", "80")
        .env_remove("MANOPT")
        .output()
        .unwrap_or_else(|e| panic!("man (package man-db) is needed: {e}"))
}

/// The page as `man` renders it.
fn rendered() -> String {
    let out = man(Path::new(PAGE));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The body of section `name` of the rendered page: from its heading to the next one.
fn section(text: &str, name: &str) -> String {
    let mut lines = text.lines().skip_while(|l| *l != name);
    assert!(
        lines.next().is_some(),
        "the page has no section {name}:\n{text}"
    );
    lines
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_man_page_renders_without_warnings() {
    let out = man(Path::new(PAGE));
    assert!(out.status.success(), "man failed: {out:?}");
    assert!(
        out.stderr.is_empty(),
        "MANWIDTH=80 man --warnings -l man/sandgate.1 warns:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty(), "man printed nothing");
}

#[test]
fn the_warning_check_sees_a_real_warning() {
    // Control for the test above: the same invocation on the page with an undefined macro
    // and an unbreakable line must print groff's warnings, or an empty stderr proves
    // nothing.
    let dir = tempfile::tempdir().unwrap();
    let broken: PathBuf = dir.path().join("broken.1");
    let mut text = std::fs::read_to_string(PAGE).unwrap();
    text.push_str(".SH BROKEN\n.NOSUCHMACRO\n");
    text.push_str(&"x".repeat(120));
    text.push('\n');
    std::fs::write(&broken, text).unwrap();
    let out = man(&broken);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("NOSUCHMACRO") && stderr.contains("warning"),
        "man --warnings did not report an undefined macro: {stderr:?}"
    );
    assert!(
        stderr.contains("can't break line") || stderr.contains("cannot break line"),
        "man --warnings did not report an overlong line at MANWIDTH=80: {stderr:?}"
    );
}

#[test]
fn the_man_page_has_every_section() {
    let text = rendered();
    for name in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "SUBCOMMANDS",
        "SHELL MODE",
        "NETWORK AND CACHES",
        "HOME AND SECRETS",
        "DENIAL MARKERS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "EXAMPLES",
        "SEE ALSO",
    ] {
        assert!(
            !section(&text, name).trim().is_empty(),
            "section {name} is empty"
        );
    }
    // clap_mangen's options, under OPTIONS and any headings the CLI groups them in.
    let options = text
        .split("\nOPTIONS\n")
        .nth(1)
        .and_then(|rest| rest.split("\nSUBCOMMANDS\n").next())
        .unwrap_or_default();
    for flag in [
        "--sandbox-permissions",
        "--approval-endpoint",
        "--denial-log",
    ] {
        assert!(options.contains(flag), "OPTIONS lacks {flag}:\n{options}");
    }
}

#[test]
fn the_synopsis_shows_every_way_to_run_a_command() {
    let text = rendered();
    let synopsis = section(&text, "SYNOPSIS");
    let lines: Vec<&str> = synopsis.lines().map(str::trim).collect();
    for form in [
        "sandgate [FLAGS] -- CMD [ARGS...]",
        "sandgate [FLAGS] [SHELL-OPTIONS] -c CMDSTRING [ARG0 [ARGS...]]",
        "sandgate [FLAGS] [SHELL-OPTIONS] SCRIPT [ARGS...]",
        "sandgate [FLAGS] [SHELL-OPTIONS] -s [ARGS...]",
        "sandgate-sh [SHELL-OPTIONS] -c CMDSTRING [ARG0 [ARGS...]]",
        "sandgate-prefix CMDSTRING",
    ] {
        assert!(lines.contains(&form), "SYNOPSIS lacks {form}:\n{synopsis}");
    }
    // Every subcommand, generated from the CLI definitions.
    let command = <sandgate::cli::Cli as clap::CommandFactory>::command();
    for sub in command.get_subcommands() {
        let start = format!("sandgate {}", sub.get_name());
        assert!(
            lines.iter().any(|l| l.starts_with(&start)),
            "SYNOPSIS lacks {start}:\n{synopsis}"
        );
    }
}

/// Every `SANDGATE_*` name in the Rust sources under `dir`.
fn sandgate_variables(dir: &Path, out: &mut std::collections::BTreeSet<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sandgate_variables(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (at, _) in text.match_indices("SANDGATE_") {
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                let name = name.trim_end_matches('_');
                if name.len() > "SANDGATE".len() {
                    out.insert(name.to_owned());
                }
            }
        }
    }
}

#[test]
fn environment_names_every_variable_the_code_reads() {
    let text = rendered();
    let environment = section(&text, "ENVIRONMENT");
    // The page wraps lines but never hyphenates: a name is whole on one line.
    let words: std::collections::BTreeSet<&str> = environment
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let mut read = std::collections::BTreeSet::new();
    sandgate_variables(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut read,
    );
    assert!(
        read.contains("SANDGATE_TTY") && read.len() > 10,
        "the scan of src/ found too little: {read:?}"
    );
    for name in &read {
        assert!(
            words.contains(name.as_str()),
            "ENVIRONMENT does not describe {name}, which src/ reads"
        );
    }
    // And nothing the code does not read.
    for word in words.iter().filter(|w| w.starts_with("SANDGATE_")) {
        assert!(
            read.contains(*word),
            "ENVIRONMENT describes {word}, which nothing in src/ reads"
        );
    }
    for name in [
        "CI",
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "TMPDIR",
        "PATH",
    ] {
        assert!(words.contains(name), "ENVIRONMENT lacks {name}");
    }
}

#[test]
fn files_names_the_paths_the_code_uses() {
    let text = rendered();
    let files = section(&text, "FILES");
    let mut paths = vec![
        "$XDG_CONFIG_HOME/sandgate/config.json".to_owned(),
        "~/.config/sandgate/config.json".to_owned(),
        "WORKSPACE/.sandgate/config.json".to_owned(),
        "$XDG_STATE_HOME/sandgate/audit.jsonl".to_owned(),
        "~/.local/state/sandgate/audit.jsonl".to_owned(),
        "--denial-log".to_owned(),
    ];
    // The two paths the code computes, as it computes them (the managed file unless the
    // environment moves it).
    if std::env::var_os("SANDGATE_MANAGED_CONFIG").is_none() {
        paths.push(
            sandgate::policy::config::managed_path()
                .display()
                .to_string(),
        );
    }
    let base = sandgate::private_temp::base();
    let base = base.display().to_string();
    let uid = nix::unistd::geteuid().to_string();
    let base = base
        .strip_suffix(&uid)
        .unwrap_or_else(|| panic!("{base} does not end in the uid {uid}"));
    paths.push(format!("{base}UID/NAME-HASH"));
    paths.push(format!("{base}UID/NAME-HASH.caches"));
    for path in &paths {
        assert!(
            files.contains(path.as_str()),
            "FILES lacks {path}:\n{files}"
        );
    }
}

#[test]
fn exit_status_lists_every_code_sandgate_uses() {
    use sandgate::error::*;
    let text = rendered();
    let exit = section(&text, "EXIT STATUS");
    for code in [
        EXIT_USAGE,
        EXIT_NOT_GRANTED,
        EXIT_CONFIG,
        EXIT_INTERNAL,
        EXIT_NOT_EXECUTABLE,
        EXIT_NOT_FOUND,
    ] {
        assert!(
            exit.lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} "))),
            "EXIT STATUS has no entry for {code}:\n{exit}"
        );
    }
}

#[test]
fn see_also_names_only_pages_that_exist() {
    let text = rendered();
    // The section's one line (the page's footer follows it).
    assert_eq!(
        section(&text, "SEE ALSO").trim().lines().next(),
        Some("bwrap(1), landlock(7), seccomp(2)")
    );
    // No reference to a sandgate page of its own (sandgate-doctor(1) and the like).
    for (at, _) in text.match_indices("sandgate-") {
        let rest: String = text[at..]
            .chars()
            .skip("sandgate-".len())
            .skip_while(|c| c.is_ascii_lowercase() || *c == '-')
            .take(1)
            .collect();
        assert!(
            rest != "(",
            "the page names a man page that does not exist: {}",
            &text[at..(at + 30).min(text.len())]
        );
    }
}

#[test]
fn completions_are_produced_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("sandbox"),
            "{shell}"
        );
    }
}
