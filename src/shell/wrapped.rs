//! The caller's own command inside a command string that an agent wrapped before handing
//! it to its shell. A directive belongs on the first line of the command the model wrote;
//! some agents put a guard in front of that command, or pass it to `eval`, so the first
//! line sandgate is given is the agent's, not the model's:
//!
//! * a shell-options guard ending in `; `, then the command on the same line:
//!   `shopt -u promptvars nullglob extglob; CMD`;
//! * a guard, then the command as one quoted word given to `eval`, then redirections and
//!   more of the agent's own commands:
//!   `{ shopt -u extglob || setopt NO_EXTENDED_GLOB; } >/dev/null 2>&1 || true && eval 'CMD' < /dev/null && pwd -P >| /tmp/cwd`.
//!
//! Only these shapes are unwrapped, and only a word whose text is fixed (quotes and
//! backslashes, no expansion): the command found is the text the shell will run. Nothing
//! is removed from what runs — the directive is a comment there too — so an approver is
//! shown exactly the string that runs if it grants.

/// The command inside `command`, when `command` is one of the wrapped shapes.
pub fn inner_command(command: &str) -> Option<String> {
    let first_line = command.lines().next().unwrap_or_default();
    let guard_len = options_guard(first_line)?;
    let after = &command[guard_len..];
    if let Some(rest) = after.strip_prefix("; ") {
        return Some(rest.to_owned());
    }
    let rest = after.strip_prefix(" && eval ")?;
    let (word, rest) = shell_word(rest)?;
    // eval runs all its words joined: the first is the command only when it is the last.
    ends_the_words(rest).then_some(word)
}

/// Whether `rest`, what follows a word, holds no further word of the same command: only
/// blanks, then the end, a newline, an operator or a redirection (`2>`, `>|`, `<`).
fn ends_the_words(rest: &str) -> bool {
    let rest = rest.trim_start_matches([' ', '\t']);
    let after_fd = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if after_fd.len() < rest.len() {
        return after_fd.starts_with(['<', '>']);
    }
    rest.is_empty() || rest.starts_with(['\n', ';', '&', '|', '<', '>', ')'])
}

/// The length of a shell-options guard at the start of `line`: `shopt -u NAMES`, or
/// `{ shopt -u NAMES || setopt NAMES; }`, each optionally followed by redirections of
/// its error output and `|| true`.
fn options_guard(line: &str) -> Option<usize> {
    let names = |s: &str| {
        let end = s
            .find(|c: char| !(c.is_ascii_alphabetic() || c == '_' || c == ' '))
            .unwrap_or(s.len());
        let end = s[..end].trim_end().len();
        (end > 0).then_some(end)
    };
    let mut at;
    if let Some(rest) = line.strip_prefix("{ shopt -u ") {
        let n = names(rest)?;
        let rest = rest[n..].strip_prefix(" || setopt ")?;
        let m = names(rest)?;
        rest[m..].strip_prefix("; }")?;
        at = line.len() - rest.len() + m + "; }".len();
    } else {
        let rest = line.strip_prefix("shopt -u ")?;
        at = "shopt -u ".len() + names(rest)?;
    }
    for tail in [" >/dev/null 2>&1", " 2>/dev/null", " || true"] {
        if line[at..].starts_with(tail) {
            at += tail.len();
        }
    }
    if line[at..].starts_with(" || true") {
        at += " || true".len();
    }
    Some(at)
}

/// One shell word at the start of `text`, made of single-quoted, double-quoted and
/// backslash-escaped parts: its value and the rest of `text`. `None` when the word could
/// expand (`$`, a backquote, a glob) or is not closed: then its value is not known here.
fn shell_word(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    // At the start of a word `#` begins a comment: eval gets no word at all.
    if text.starts_with('#') {
        return None;
    }
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => loop {
                let (_, c) = chars.next()?;
                if c == '\'' {
                    break;
                }
                value.push(c);
            },
            '"' => loop {
                let (_, c) = chars.next()?;
                match c {
                    '"' => break,
                    '$' | '`' => return None,
                    '\\' => {
                        let (_, next) = chars.next()?;
                        if !matches!(next, '$' | '`' | '"' | '\\' | '\n') {
                            value.push('\\');
                        }
                        if next != '\n' {
                            value.push(next);
                        }
                    }
                    c => value.push(c),
                }
            },
            '\\' => {
                let (_, next) = chars.next()?;
                if next != '\n' {
                    value.push(next);
                }
            }
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => {
                return Some((value, &text[i..]));
            }
            '$' | '`' | '*' | '?' | '[' | '{' | '~' => return None,
            c => value.push(c),
        }
    }
    Some((value, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word quoted as node's and Python's helpers quote one.
    fn quoted(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\"'\"'"))
    }

    const CMD: &str =
        "# sandgate: sandbox_permissions=full-access justification=\"it's needed\"\nnpm ci";

    #[test]
    fn an_eval_after_an_options_guard_is_unwrapped() {
        for guard in [
            "{ shopt -u extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; } >/dev/null 2>&1 || true",
            "shopt -u extglob 2>/dev/null || true",
        ] {
            let line = format!(
                "{guard} && eval {} < /dev/null && pwd -P >| /tmp/x-cwd",
                quoted(CMD)
            );
            assert_eq!(inner_command(&line).as_deref(), Some(CMD), "{line}");
        }
        // `'\''` is the other common spelling of a quote inside a quoted word.
        let line = format!(
            "shopt -u extglob 2>/dev/null || true && eval '{}' < /dev/null",
            CMD.replace('\'', r"'\''")
        );
        assert_eq!(inner_command(&line).as_deref(), Some(CMD));
        // Redirections and further commands after the word are the agent's, not eval's.
        for tail in [
            "",
            " ",
            " 2>/dev/null",
            " >| /tmp/x",
            ";pwd",
            " | cat",
            "\npwd",
        ] {
            let line = format!("shopt -u extglob && eval {}{tail}", quoted(CMD));
            assert_eq!(inner_command(&line).as_deref(), Some(CMD), "{line:?}");
        }
    }

    #[test]
    fn a_command_after_a_shopt_guard_is_unwrapped() {
        let line = format!("shopt -u promptvars nullglob extglob nocaseglob dotglob; {CMD}");
        assert_eq!(inner_command(&line).as_deref(), Some(CMD));
    }

    #[test]
    fn other_shapes_and_words_that_expand_are_left_alone() {
        for line in [
            CMD.to_owned(),
            format!("echo hi; {CMD}"),
            format!("shopt -s extglob && eval {}", quoted(CMD)),
            // The word's value depends on the environment: not what the text says.
            "shopt -u extglob 2>/dev/null || true && eval \"$CMD\"".to_owned(),
            "shopt -u extglob 2>/dev/null || true && eval $CMD".to_owned(),
            "shopt -u extglob 2>/dev/null || true && eval 'unclosed".to_owned(),
            format!("shopt -u extglob\n&& eval {}", quoted(CMD)),
            // eval joins all its words: the first alone is not what runs.
            format!("shopt -u extglob && eval {} 'rm -rf ~'", quoted(CMD)),
            format!("shopt -u extglob && eval {}\t/etc", quoted(CMD)),
            format!("shopt -u extglob && eval {} 2", quoted(CMD)),
            // A word that starts with `#` is a comment to the shell, not eval's argument.
            format!("shopt -u extglob && eval #{}", quoted(CMD)),
        ] {
            assert_eq!(inner_command(&line), None, "{line}");
        }
    }
}
