//! Every example in the README's `console` blocks runs, as a newcomer would type it, with
//! sandgate on PATH. (The set-up and install blocks are run verbatim by `.ci/run` instead:
//! one builds and runs this very suite, the other installs sandgate.)

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::*;

fn examples() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .unwrap_or_default();
    let setup = readme
        .split("<!-- /setup -->")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut lines = Vec::new();
    let mut in_console = false;
    let mut in_install = false;
    for line in setup.lines() {
        match line.trim() {
            "<!-- install -->" => in_install = true,
            "<!-- /install -->" => in_install = false,
            _ if in_install => {}
            "```console" => in_console = true,
            "```" => in_console = false,
            l if in_console => {
                if let Some(cmd) = l.strip_prefix("$ ") {
                    lines.push(cmd.to_owned());
                }
            }
            _ => {}
        }
    }
    lines
}

#[test]
fn every_readme_example_runs() {
    let env = TestEnv::new();
    let examples = examples();
    assert!(examples.len() >= 5, "{examples:?}");
    let bin = sandgate_inside();
    let dir = bin
        .parent()
        .unwrap_or(std::path::Path::new("/"))
        .to_path_buf();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for example in examples {
        let out = output(
            env.command("/bin/sh")
                .arg("-c")
                .arg(&example)
                .env("PATH", &path),
        );
        assert_status(&out, 0);
        assert!(!out.stdout.is_empty(), "{example}: no output");
    }
}
