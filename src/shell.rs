//! Shell mode: sandgate standing in for `bash`, so agents, CI runners and `make`
//! can use it as their shell with no glue.
//!
//! The command line is split before clap sees it: sandgate's own long options (those clap
//! defines) stay sandgate's; bash-style options (`-c`, grouped `-lc`/`-euo pipefail`,
//! `-o OPT`/`+o OPT`, `--login`, `--norc`, …) and everything after the command string or
//! script name go to the real shell, in their original order. A first line
//! `# sandgate: sandbox_permissions=MODE justification="TEXT"` in a `-c` string is the same
//! escalation request as the flags, and is removed before the shell runs the rest.
//!
//! `--` keeps sandgate's own meaning: what follows is a command to execute directly.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How sandgate was invoked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Plain sandgate: clap parses everything (subcommands, `-- CMD`).
    Plain(Vec<OsString>),
    /// Run the real shell with `shell_args`; `sandgate_args` are sandgate's own options.
    Shell {
        sandgate_args: Vec<OsString>,
        shell: ShellCall,
    },
}

/// What the real shell is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellCall {
    /// The shell's arguments in their original order (the command string included).
    pub args: Vec<OsString>,
    /// Where the shell reads its commands.
    pub source: Source,
    /// `--version`: the shell reports its version; nothing is sandboxed to speak of.
    pub version: bool,
    /// `-i` (or `+i`): the shell may be interactive, where a `#` line is a comment only
    /// while `interactive_comments` is on, which an option or a startup file can turn off.
    pub interactive: bool,
}

/// Where the shell reads its commands from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Source {
    /// `-c STRING`: the index of the string in [`ShellCall::args`].
    Command(usize),
    /// A script file: the index of its name in [`ShellCall::args`].
    File(usize),
    /// Standard input (`-s`, or no operand).
    #[default]
    Stdin,
}

impl ShellCall {
    /// The `-c` command string.
    pub fn command(&self) -> Option<&OsStr> {
        match self.source {
            Source::Command(i) => self.args.get(i).map(OsString::as_os_str),
            _ => None,
        }
    }

    /// The script file's name.
    pub fn script(&self) -> Option<&OsStr> {
        match self.source {
            Source::File(i) => self.args.get(i).map(OsString::as_os_str),
            _ => None,
        }
    }
}

/// bash's long options that take no value.
const SHELL_LONG: &[&str] = &[
    "--debug",
    "--pretty-print",
    "--login",
    "--noprofile",
    "--norc",
    "--posix",
    "--noediting",
    "--restricted",
    "--verbose",
    "--debugger",
    "--dump-strings",
    "--dump-po-strings",
    "--protected",
    "--version",
    "--help",
];
/// bash's long options that take a value.
const SHELL_LONG_VALUE: &[&str] = &["--rcfile", "--init-file"];

/// Returns true when `argv0` names a shell-mode link (`sandgate-sh`, or any name ending
/// in `sh`).
pub fn is_shell_name(argv0: &OsStr) -> bool {
    Path::new(argv0)
        .file_name()
        .is_some_and(|n| n.as_bytes().ends_with(b"sh"))
}

/// Returns true when `argv0` names the prefix link (`sandgate-prefix`).
pub fn is_prefix_name(argv0: &OsStr) -> bool {
    Path::new(argv0)
        .file_name()
        .is_some_and(|n| n == "sandgate-prefix")
}

/// Who is presumed to be calling, from how sandgate was started. Decided once, from argv[0]
/// (and the `prefix` subcommand), and handed down to the choice of answerer.
///
/// Only the links count as an agent: they are how an agent is wired to sandgate (its shell
/// or shell prefix), and such an agent usually owns the terminal or pty it runs in, so it
/// could read a prompt and type the answer itself. `sandgate` by its own name, `-c` and a
/// script on stdin included, is what a person types; an agent that calls it that way on a
/// pty it owns needs `SANDGATE_TTY=never` or an approval endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// Started as `sandgate` (any form): the terminal may answer.
    Person,
    /// Started through a link (`sandgate-sh`, a `bash` link, `sandgate-prefix`) or as
    /// `sandgate prefix`: the terminal answers only with `SANDGATE_TTY=always`.
    AgentLink,
}

impl Caller {
    /// Returns who calls when sandgate was started with `argv0`.
    pub fn of_argv0(argv0: &OsStr) -> Caller {
        if is_shell_name(argv0) || is_prefix_name(argv0) {
            Caller::AgentLink
        } else {
            Caller::Person
        }
    }
}

/// Splits a command line. `long_flags` are sandgate's long options with whether each takes
/// a value; `subcommands` its subcommand names. `as_shell`: invoked as a shell link, so
/// every argument is the shell's.
pub fn classify(
    args: Vec<OsString>,
    long_flags: &[(String, bool)],
    subcommands: &[String],
    as_shell: bool,
) -> Invocation {
    let Some((argv0, rest)) = args.split_first() else {
        return Invocation::Plain(args);
    };
    if !as_shell {
        if let Some(first) = rest.first() {
            let first = first.to_string_lossy();
            if subcommands.iter().any(|s| *s == first)
                || first == "--help"
                || first == "-h"
                || first == "--version"
                || first == "-V"
            {
                return Invocation::Plain(args);
            }
        }
    }
    let mut sandgate_args = vec![argv0.clone()];
    let mut shell = ShellCall::default();
    let mut wants_command = false;
    // bash: with -s, operands are positional parameters and the script comes on stdin.
    let mut wants_stdin = false;
    // bash reads its long options only before the first single-letter one, and there
    // spelled with one dash as well as two (`-norc`, `-rcfile FILE`).
    let mut short_seen = false;
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        let text = arg.to_string_lossy();
        // bash: a lone `-` (or `+`) ends the shell's options as `--` does.
        if text == "-" || text == "+" {
            shell.args.push(arg.clone());
            if i + 1 < rest.len() {
                shell.source = first_operand(wants_command, wants_stdin, shell.args.len());
            }
            shell.args.extend(rest[i + 1..].iter().cloned());
            break;
        }
        if text == "--" {
            if as_shell || wants_command || !shell.args.is_empty() {
                // bash: `--` ends the shell's options; what follows it is the first
                // operand, as below.
                shell.args.push(arg.clone());
                if i + 1 < rest.len() {
                    shell.source = first_operand(wants_command, wants_stdin, shell.args.len());
                }
                shell.args.extend(rest[i + 1..].iter().cloned());
                break;
            }
            // `sandgate [FLAGS] -- CMD ARGS` executes CMD directly.
            return Invocation::Plain(args);
        }
        if !as_shell && text.starts_with("--") {
            let name = text.split('=').next().unwrap_or_default();
            if let Some((_, takes_value)) = long_flags
                .iter()
                .find(|(f, _)| f == name.trim_start_matches("--"))
            {
                sandgate_args.push(arg.clone());
                if *takes_value && !text.contains('=') {
                    if let Some(value) = rest.get(i + 1) {
                        sandgate_args.push(value.clone());
                        i += 1;
                    }
                }
                i += 1;
                continue;
            }
        }
        let long = match text.strip_prefix('-') {
            Some(one) if !short_seen && !one.starts_with('-') => format!("--{one}"),
            _ => text.to_string(),
        };
        if SHELL_LONG.contains(&long.as_str()) {
            shell.version |= long == "--version";
            shell.args.push(arg.clone());
            i += 1;
            continue;
        }
        if SHELL_LONG_VALUE.contains(&long.as_str()) {
            shell
                .args
                .extend(rest[i..(i + 2).min(rest.len())].iter().cloned());
            i += 2;
            continue;
        }
        // A long option that is neither sandgate's nor the shell's: clap says so.
        if !as_shell && text.starts_with("--") {
            return Invocation::Plain(args);
        }
        let is_cluster = (text.starts_with('-') || text.starts_with('+'))
            && text.len() > 1
            && !text.starts_with("--");
        if is_cluster {
            short_seen = true;
            shell.args.push(arg.clone());
            // bash: `c` and `s` mean the same after `+` as after `-`, and each `o` or `O`
            // takes the next argument as an option name (`-oo errexit pipefail`).
            let letters = &text[1..];
            wants_command |= letters.contains('c');
            wants_stdin |= letters.contains('s');
            shell.interactive |= letters.contains('i');
            let names = letters.chars().filter(|c| matches!(c, 'o' | 'O')).count();
            let values = &rest[(i + 1).min(rest.len())..(i + 1 + names).min(rest.len())];
            shell.args.extend(values.iter().cloned());
            i += 1 + values.len();
            continue;
        }
        // A subcommand's name after sandgate's own flags is that subcommand, and the flags
        // are its own (`sandgate --preset locked presets`), as they are right after it; a
        // program of that name runs with `sandgate [FLAGS] -- NAME`.
        if !as_shell && shell.args.is_empty() && subcommands.iter().any(|s| *s == text) {
            let mut plain = vec![argv0.clone()];
            plain.extend(rest[i..].iter().cloned());
            plain.extend(sandgate_args.into_iter().skip(1));
            return Invocation::Plain(plain);
        }
        // The first operand: the command string (with -c) or the script; everything after
        // it is the shell's ($0, $1, …), never sandgate's.
        shell.source = first_operand(wants_command, wants_stdin, shell.args.len());
        shell.args.extend(rest[i..].iter().cloned());
        break;
    }
    if !as_shell && shell.args.is_empty() {
        return Invocation::Plain(args);
    }
    Invocation::Shell {
        sandgate_args,
        shell,
    }
}

mod wrapped;

pub use wrapped::inner_command;

/// What the shell's first operand, at `at` in its arguments, is: the command string with
/// `-c`, else the script — unless `-s` makes every operand a positional parameter and the
/// script comes on stdin.
fn first_operand(wants_command: bool, wants_stdin: bool, at: usize) -> Source {
    if wants_command {
        Source::Command(at)
    } else if wants_stdin {
        Source::Stdin
    } else {
        Source::File(at)
    }
}

/// An escalation request written as the first line of a command string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub mode: String,
    pub justification: String,
}

/// The directive prefix.
pub const DIRECTIVE: &str = "# sandgate:";

/// Splits a leading directive line off `command`: `Ok(None)` when there is none, the
/// directive and the rest otherwise.
///
/// # Errors
/// A first line that starts like a directive but does not parse: refused rather than
/// silently run without the request the caller meant to make.
pub fn directive(command: &str) -> Result<Option<(Directive, String)>, String> {
    let (first, rest) = command.split_once('\n').unwrap_or((command, ""));
    // Only bash's blanks may come before the `#`: after any other whitespace (a no-break
    // space, a vertical tab) the shell reads a command, not a comment, and a directive left
    // in place (a script, an agent's wrapper) would run while the approver read a comment.
    let Some(body) = first
        .trim_start_matches([' ', '\t'])
        .strip_prefix(DIRECTIVE)
    else {
        return Ok(None);
    };
    let body = body.trim();
    let bad = || {
        format!("malformed directive {first:?}: expected `{DIRECTIVE} sandbox_permissions=MODE justification=\"TEXT\"`")
    };
    let rest_of = body.strip_prefix("sandbox_permissions=").ok_or_else(bad)?;
    let (mode, after) = rest_of.split_once(char::is_whitespace).ok_or_else(bad)?;
    let quoted = after
        .trim()
        .strip_prefix("justification=\"")
        .ok_or_else(bad)?;
    let justification = quoted.strip_suffix('"').ok_or_else(bad)?;
    Ok(Some((
        Directive {
            mode: mode.to_owned(),
            justification: justification.replace("\\\"", "\""),
        },
        rest.to_owned(),
    )))
}

/// Finds the directive in the head of a script (a file, or stdin): its first line, or the
/// second after a `#!` line. To the shell it is a comment, so it stays in the script.
///
/// # Errors
/// As [`directive`]: a line that starts like a directive but does not parse.
pub fn script_directive(head: &[u8]) -> Result<Option<Directive>, String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let line = if first.starts_with("#!") {
        lines.next().unwrap_or_default()
    } else {
        first
    };
    Ok(directive(line)?.map(|(found, _)| found))
}

/// Returns the directive line asking for `mode` (the `<why>` placeholder for the reason).
pub fn directive_line(mode: &str, why: &str) -> String {
    format!("{DIRECTIVE} sandbox_permissions={mode} justification=\"{why}\"")
}

/// Finds the real shell: `SANDGATE_REAL_SHELL`, else `/bin/bash`, else `/bin/sh` — never
/// sandgate itself, which would loop.
pub fn real_shell() -> Option<PathBuf> {
    let me = std::fs::metadata("/proc/self/exe").ok();
    let is_me = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        let Some(me) = &me else { return false };
        std::fs::metadata(p).is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino())
    };
    let configured = std::env::var_os("SANDGATE_REAL_SHELL").map(PathBuf::from);
    configured
        .into_iter()
        .chain([PathBuf::from("/bin/bash"), PathBuf::from("/bin/sh")])
        .find(|p| p.is_absolute() && p.exists() && !is_me(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> Vec<(String, bool)> {
        vec![
            ("sandbox".into(), true),
            ("no-tty".into(), false),
            ("preset".into(), true),
        ]
    }

    fn split(args: &[&str], as_shell: bool) -> Invocation {
        classify(
            args.iter().map(OsString::from).collect(),
            &flags(),
            &["doctor".into()],
            as_shell,
        )
    }

    fn shell_args(args: &[&str]) -> Vec<String> {
        match split(args, false) {
            Invocation::Shell { shell, .. } => shell
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_the_links_are_agent_callers() {
        for link in [
            "sandgate-sh",
            "/usr/local/bin/bash",
            "sh",
            "zsh",
            "sandgate-prefix",
        ] {
            assert_eq!(
                Caller::of_argv0(OsStr::new(link)),
                Caller::AgentLink,
                "{link}"
            );
        }
        for name in [
            "sandgate",
            "/usr/bin/sandgate",
            "./target/debug/sandgate",
            "",
        ] {
            assert_eq!(Caller::of_argv0(OsStr::new(name)), Caller::Person, "{name}");
        }
    }

    #[test]
    fn bash_options_go_to_the_shell_and_sandgate_options_stay() {
        let inv = split(
            &[
                "sandgate",
                "--sandbox",
                "read-only",
                "-euo",
                "pipefail",
                "-c",
                "echo hi",
                "zero",
                "one",
            ],
            false,
        );
        let Invocation::Shell {
            sandgate_args,
            shell,
        } = inv
        else {
            panic!("shell mode")
        };
        assert_eq!(
            sandgate_args,
            vec![
                OsString::from("sandgate"),
                "--sandbox".into(),
                "read-only".into()
            ]
        );
        assert_eq!(
            shell.args,
            ["-euo", "pipefail", "-c", "echo hi", "zero", "one"].map(OsString::from)
        );
        assert_eq!(shell.command(), Some(OsStr::new("echo hi")));
        assert_eq!(shell_args(&["sandgate", "-lc", "x"]), ["-lc", "x"]);
        assert_eq!(
            shell_args(&["sandgate", "-c", "x", "-l"]),
            ["-c", "x", "-l"]
        );
        assert_eq!(
            shell_args(&["sandgate", "--login", "+o", "errexit", "-c", "x"]),
            ["--login", "+o", "errexit", "-c", "x"]
        );
        assert_eq!(
            shell_args(&["sandgate", "script.sh", "--sandbox", "a"]),
            ["script.sh", "--sandbox", "a"]
        );
    }

    #[test]
    fn plain_forms_stay_plain() {
        for args in [
            &["sandgate", "doctor"][..],
            &["sandgate", "--sandbox", "read-only", "--", "ls"],
            &["sandgate", "--version"],
            &["sandgate"],
        ] {
            assert!(
                matches!(split(args, false), Invocation::Plain(_)),
                "{args:?}"
            );
        }
        // As a shell link, even `--version` is the shell's.
        assert!(matches!(
            split(&["sandgate-sh", "--version"], true),
            Invocation::Shell { .. }
        ));
    }

    #[test]
    fn after_double_dash_the_first_operand_is_the_command_or_the_script() {
        let call = |args: &[&str], as_shell: bool| match split(args, as_shell) {
            Invocation::Shell { shell, .. } => shell,
            other => panic!("{other:?}"),
        };
        let shell = call(&["sandgate-sh", "-c", "--", "make"], true);
        assert_eq!(shell.source, Source::Command(2));
        assert_eq!(shell.command(), Some(OsStr::new("make")));
        let shell = call(&["sandgate-sh", "--", "job.sh", "x"], true);
        assert_eq!(shell.source, Source::File(1));
        assert_eq!(shell.script(), Some(OsStr::new("job.sh")));
        let shell = call(&["sandgate", "-e", "--", "job.sh"], false);
        assert_eq!(shell.source, Source::File(2));
        let shell = call(&["sandgate-sh", "-s", "--", "a", "b"], true);
        assert_eq!(shell.source, Source::Stdin);
        let shell = call(&["sandgate-sh", "--"], true);
        assert_eq!(shell.source, Source::Stdin);
    }

    /// bash's own reading of its options decides what sandgate takes for the command
    /// string or the script: a directive is honoured only where bash runs it.
    #[test]
    fn the_first_operand_is_where_bash_finds_it() {
        let call = |args: &[&str], as_shell: bool| match split(args, as_shell) {
            Invocation::Shell { shell, .. } => shell,
            other => panic!("{other:?}"),
        };
        // `+c` and `+s` are `-c` and `-s` to bash.
        let shell = call(&["sandgate-sh", "+s", "job.sh"], true);
        assert_eq!(shell.source, Source::Stdin);
        let shell = call(&["sandgate", "+c", "ls"], false);
        assert_eq!(shell.command(), Some(OsStr::new("ls")));
        // Each `o` or `O` takes an option name; `-O` too.
        let shell = call(&["sandgate-sh", "-c", "-O", "extglob", "make"], true);
        assert_eq!(shell.command(), Some(OsStr::new("make")));
        let shell = call(
            &["sandgate-sh", "-coo", "errexit", "pipefail", "make"],
            true,
        );
        assert_eq!(shell.command(), Some(OsStr::new("make")));
        // A lone `-` or `+` ends the options as `--` does.
        let shell = call(&["sandgate-sh", "-", "job.sh"], true);
        assert_eq!(shell.script(), Some(OsStr::new("job.sh")));
        let shell = call(&["sandgate-sh", "-c", "+", "make"], true);
        assert_eq!(shell.command(), Some(OsStr::new("make")));
        let shell = call(&["sandgate", "-"], false);
        assert_eq!(shell.source, Source::Stdin);
        // Long options with one dash, before the first single-letter option; after it,
        // bash reads the letters.
        let shell = call(&["sandgate-sh", "-norc", "job.sh"], true);
        assert_eq!(shell.script(), Some(OsStr::new("job.sh")));
        let shell = call(&["sandgate-sh", "-rcfile", "rc", "-c", "make"], true);
        assert_eq!(shell.command(), Some(OsStr::new("make")));
        let shell = call(&["sandgate-sh", "--debug", "job.sh"], true);
        assert_eq!(shell.script(), Some(OsStr::new("job.sh")));
        let shell = call(&["sandgate-sh", "-e", "-norc", "errexit", "echo hi"], true);
        assert_eq!(shell.command(), Some(OsStr::new("echo hi")));
    }

    #[test]
    fn flags_before_a_subcommand_follow_it() {
        let plain = |args: &[&str]| match split(args, false) {
            Invocation::Plain(args) => args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            plain(&["sandgate", "--preset", "locked", "--no-tty", "doctor", "--json"]),
            ["sandgate", "doctor", "--json", "--preset", "locked", "--no-tty"]
        );
        assert_eq!(
            plain(&["sandgate", "--sandbox=read-only", "doctor"]),
            ["sandgate", "doctor", "--sandbox=read-only"]
        );
        // A program of that name: after `--`, or as the shell's operand.
        assert_eq!(
            plain(&["sandgate", "--preset", "locked", "--", "doctor"]),
            ["sandgate", "--preset", "locked", "--", "doctor"]
        );
        assert_eq!(shell_args(&["sandgate", "-c", "doctor"]), ["-c", "doctor"]);
        assert_eq!(shell_args(&["sandgate", "-e", "doctor"]), ["-e", "doctor"]);
        // An unknown long option is sandgate's usage error, not a script's name.
        assert!(matches!(
            split(&["sandgate", "--bogus", "--", "true"], false),
            Invocation::Plain(_)
        ));
    }

    #[test]
    fn directives_parse_and_malformed_ones_are_refused() {
        let (d, rest) = directive(
            "# sandgate: sandbox_permissions=full-access justification=\"fetch deps\"\nnpm ci",
        )
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("directive"));
        assert_eq!(
            d,
            Directive {
                mode: "full-access".into(),
                justification: "fetch deps".into()
            }
        );
        assert_eq!(rest, "npm ci");
        assert_eq!(directive("echo hi"), Ok(None));
        let line = "# sandgate: sandbox_permissions=full-access justification=\"x\"";
        assert!(matches!(directive(&format!(" \t{line}")), Ok(Some(_))));
        for space in [
            "\u{a0}", "\u{b}", "\u{c}", "\r", "\u{85}", "\u{2028}", "\u{3000}",
        ] {
            assert_eq!(directive(&format!("{space}{line}")), Ok(None), "{space:?}");
        }
        assert!(directive("# sandgate: please").is_err());
        assert_eq!(
            directive_line("workspace-write", "<why>"),
            "# sandgate: sandbox_permissions=workspace-write justification=\"<why>\""
        );
    }
}
