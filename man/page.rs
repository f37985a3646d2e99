//! Assembles the man page: clap_mangen renders the title, NAME, DESCRIPTION and OPTIONS
//! from the CLI definitions, the subcommands and the flag list of the SYNOPSIS are
//! generated here from the same definitions, and the sections clap knows nothing about are
//! hand-written roff in `man/sections/`. `examples/gen-man.rs` prints the result (what
//! `scripts/gen-man` commits as `man/sandgate.1`) and `tests/man.rs` compares it with the
//! committed page, so the two cannot differ.

use clap::{Arg, Command, CommandFactory};

/// The sections after OPTIONS and SUBCOMMANDS, in the order of the page.
const HAND_WRITTEN: [&str; 11] = [
    include_str!("sections/shell-mode.roff"),
    include_str!("sections/network.roff"),
    include_str!("sections/limits.roff"),
    include_str!("sections/git-config.roff"),
    include_str!("sections/secrets.roff"),
    include_str!("sections/denial-markers.roff"),
    include_str!("sections/exit-status.roff"),
    include_str!("sections/environment.roff"),
    include_str!("sections/files.roff"),
    include_str!("sections/examples.roff"),
    include_str!("sections/see-also.roff"),
];

/// The run forms of the SYNOPSIS (`-- CMD`, `-c`, `SCRIPT`, `-s`, the links).
const SYNOPSIS: &str = include_str!("sections/synopsis.roff");

/// What `roff` writes before every rendering: it defines the `Aq` string (a straight
/// apostrophe) that the generated text uses. Written once, at the top.
const APOSTROPHE_PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// Renders the whole page.
pub fn render() -> std::io::Result<Vec<u8>> {
    let command = sandgate::cli::Cli::command();
    let man = clap_mangen::Man::new(command.clone());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    // No hyphenation and a ragged right edge: option names and paths stay whole, as a
    // reader would type them.
    page.extend_from_slice(b".nh\n.nr HY 0\n.ad l\n");
    generated(&man, clap_mangen::Man::render_name_section, &mut page)?;
    page.extend_from_slice(synopsis(&command).as_bytes());
    generated(
        &man,
        clap_mangen::Man::render_description_section,
        &mut page,
    )?;
    generated(&man, clap_mangen::Man::render_options_section, &mut page)?;
    page.extend_from_slice(subcommands(&command).as_bytes());
    for text in HAND_WRITTEN {
        page.extend_from_slice(text.as_bytes());
    }
    Ok(page)
}

type Section = fn(&clap_mangen::Man, &mut dyn std::io::Write) -> std::io::Result<()>;

/// Appends one section clap_mangen renders, without the preamble it repeats each time.
fn generated(man: &clap_mangen::Man, section: Section, page: &mut Vec<u8>) -> std::io::Result<()> {
    let mut out = Vec::new();
    section(man, &mut out)?;
    let text = String::from_utf8_lossy(&out);
    let text = text.strip_prefix(APOSTROPHE_PREAMBLE).unwrap_or(&text);
    page.extend_from_slice(text.as_bytes());
    Ok(())
}

/// SYNOPSIS: the hand-written run forms, one line per subcommand, and what FLAGS stands for.
fn synopsis(command: &Command) -> String {
    let mut out = String::from(SYNOPSIS);
    for (path, sub) in leaves(command) {
        out.push_str(".br\n");
        out.push_str(&usage(&path, sub));
        out.push('\n');
    }
    out.push_str(".PP\n\\fIFLAGS\\fR are any of:");
    for arg in shown(command).filter(|a| !a.is_positional()) {
        out.push(' ');
        out.push_str(&synopsis_arg(arg));
    }
    out.push_str("\n(see OPTIONS).\n");
    out
}

/// SUBCOMMANDS: each one's usage, description and options, without pointing at pages of
/// its own (there are none).
fn subcommands(command: &Command) -> String {
    let mut out = String::from(".SH SUBCOMMANDS\n");
    for (path, sub) in leaves(command) {
        out.push_str(&format!(".SS \"{}\"\n", escape(&path.join(" "))));
        out.push_str(&usage(&path, sub));
        out.push_str("\n.PP\n");
        let about = sub.get_long_about().or_else(|| sub.get_about());
        out.push_str(&escape(&about.map(ToString::to_string).unwrap_or_default()));
        out.push('\n');
        for arg in shown(sub) {
            out.push_str(".TP\n");
            out.push_str(&option_head(arg));
            out.push('\n');
            let help = arg.get_long_help().or_else(|| arg.get_help());
            let help = help.map(ToString::to_string).unwrap_or_default();
            out.push_str(&escape(&help).replace("\n\n", "\n.IP\n"));
            let values = possible_values(arg);
            if !values.is_empty() {
                out.push_str(&format!(
                    "\n[possible values: {}]",
                    escape(&values.join(", "))
                ));
            }
            out.push('\n');
        }
    }
    out
}

/// Every runnable subcommand with its path (`sandgate audit verify`), in definition order.
fn leaves(command: &Command) -> Vec<(Vec<String>, &Command)> {
    fn walk<'a>(command: &'a Command, path: &[String], out: &mut Vec<(Vec<String>, &'a Command)>) {
        for sub in command.get_subcommands() {
            let mut here = path.to_vec();
            here.push(sub.get_name().to_owned());
            if sub.has_subcommands() {
                walk(sub, &here, out);
            } else {
                out.push((here, sub));
            }
        }
    }
    let mut out = Vec::new();
    walk(command, &[command.get_name().to_owned()], &mut out);
    out
}

/// The arguments a page shows for `command`: the visible ones it defines. The command is
/// never built, so a global flag appears once, where it is defined, and clap's own help
/// and version flags only in OPTIONS.
fn shown(command: &Command) -> impl Iterator<Item = &Arg> {
    command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
}

/// `sandgate audit verify [--log FILE]`, in roff.
fn usage(path: &[String], sub: &Command) -> String {
    let mut line = format!("\\fB{}\\fR", escape(&path.join(" ")));
    for arg in shown(sub) {
        line.push(' ');
        line.push_str(&synopsis_arg(arg));
    }
    line
}

/// One argument as a synopsis shows it: `[--log FILE]`, `DIR`, `[--keep-env NAME]...`.
fn synopsis_arg(arg: &Arg) -> String {
    let values = value_names(arg);
    let mut text = match arg.get_long() {
        Some(long) if values.is_empty() => format!("\\fB\\-\\-{}\\fR", escape(long)),
        Some(long) => format!("\\fB\\-\\-{}\\fR \\fI{}\\fR", escape(long), escape(&values)),
        None => format!("\\fI{}\\fR", escape(&values)),
    };
    if !arg.is_required_set() {
        text = format!("[{text}]");
    }
    if repeats(arg) {
        text.push_str("...");
    }
    text
}

/// The tag of an option in a list: `--log FILE`.
fn option_head(arg: &Arg) -> String {
    let values = value_names(arg);
    match arg.get_long() {
        Some(long) if values.is_empty() => format!("\\fB\\-\\-{}\\fR", escape(long)),
        Some(long) => format!("\\fB\\-\\-{}\\fR \\fI{}\\fR", escape(long), escape(&values)),
        None => format!("\\fI{}\\fR", escape(&values)),
    }
}

fn value_names(arg: &Arg) -> String {
    if !arg.get_action().takes_values() {
        return String::new();
    }
    match arg.get_value_names() {
        Some(names) => names
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" "),
        None => arg.get_id().as_str().to_uppercase(),
    }
}

fn repeats(arg: &Arg) -> bool {
    matches!(arg.get_action(), clap::ArgAction::Append)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1)
}

/// The closed set of values an option takes (none for a plain switch).
fn possible_values(arg: &Arg) -> Vec<String> {
    if !arg.get_action().takes_values() {
        return Vec::new();
    }
    arg.get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect()
}

/// Escapes text for a roff text line: backslashes, dashes, apostrophes, characters beyond
/// ASCII (as `\[uXXXX]`, which needs no input encoding), and a `.` that would start a line
/// as a request.
fn escape(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| match c {
            '\\' => "\\e".to_owned(),
            '-' => "\\-".to_owned(),
            '\'' => "\\*(Aq".to_owned(),
            c if c.is_ascii() => c.to_string(),
            c => format!("\\[u{:04X}]", u32::from(c)),
        })
        .collect();
    text.lines()
        .map(|line| {
            if line.starts_with('.') {
                format!("\\&{line}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
