//! The terminal prompt (DESIGN §4). It talks to `/dev/tty` directly — never to the
//! command's stdin or stdout, which may be pipes an agent reads — and only when sandgate is
//! in the terminal's foreground process group: an agent's full-screen UI that runs commands
//! in the background must not have its screen and keystrokes taken over.
//!
//! Only `y` or `yes` grants. Enter, anything else: rejected. EOF (Ctrl-D), Ctrl-C (watched
//! by `approval::ask`) and the timeout: cancelled. Everything shown is neutralised, so a justification or an argument
//! cannot repaint the prompt with escape sequences.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::{Outcome, Question};

/// Returns `s` with every control character shown as an escape (`\u{1b}`), so it cannot
/// move the cursor, change colours or clear the screen.
pub fn neutralise(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || is_bidi_control(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Unicode bidirectional overrides can reorder what a person reads.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// Quotes one argument for display as a POSIX shell word.
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Asks the person at the terminal.
pub fn ask(question: &Question) -> Outcome {
    let unavailable = |why: &str| Outcome::Unavailable {
        why: why.to_owned(),
    };
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return unavailable(
            "no approval channel is available: configure --approval-endpoint or run in a terminal",
        );
    };
    let foreground = nix::unistd::tcgetpgrp(tty.as_fd()).ok() == Some(nix::unistd::getpgrp());
    if !foreground {
        return unavailable(
            "sandgate is not in the terminal's foreground process group, so it will not prompt there: configure --approval-endpoint",
        );
    }
    let d = &question.display;
    let argv: Vec<String> = d.argv.iter().map(|a| neutralise(&shell_quote(a))).collect();
    let prompt = format!(
        "\nsandgate: a command asks to run with a wider sandbox\n  command:       {}\n  cwd:           {}\n  workspace:     {}\n  sandbox:       {} -> {}\n  justification: {}\nAllow this one call? [y/N] ",
        argv.join(" "),
        neutralise(&d.cwd),
        neutralise(&d.workspace),
        d.standing,
        d.requested,
        neutralise(&d.justification),
    );
    if tty.write_all(prompt.as_bytes()).is_err() {
        return unavailable("cannot write to the terminal");
    }
    let answer = read_answer(&mut tty, question);
    let _ = tty.write_all(b"\n");
    answer
}

/// Reads one line; EOF and the timeout cancel. (Ctrl-C is watched by the caller, which
/// blocks SIGINT for the whole question: see `approval::ask`.)
fn read_answer(tty: &mut std::fs::File, question: &Question) -> Outcome {
    let cancelled = |why: &str| Outcome::Cancelled {
        why: why.to_owned(),
    };
    let deadline = Instant::now() + question.timeout;
    let mut line = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return cancelled("nobody answered the prompt in time");
        }
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        let mut fds = [PollFd::new(tty.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return cancelled("the terminal went away"),
        }
        let mut buf = [0u8; 256];
        match tty.read(&mut buf) {
            Ok(0) => return cancelled("end of input at the prompt"),
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return cancelled("the terminal went away"),
        }
        if let Some(end) = line.iter().position(|b| *b == b'\n') {
            let answer = String::from_utf8_lossy(&line[..end])
                .trim()
                .to_ascii_lowercase();
            return if answer == "y" || answer == "yes" {
                Outcome::AllowedOnce
            } else {
                Outcome::Rejected
            };
        }
        if line.len() > 4096 {
            return Outcome::Rejected;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_cannot_repaint_the_prompt() {
        let shown = neutralise("ok\u{1b}[2J\u{1b}]0;pwned\u{7}\r\nallow? y\u{202e}");
        assert!(
            !shown.chars().any(|c| c.is_control() || is_bidi_control(c)),
            "{shown}"
        );
        assert!(shown.contains("\\u{1b}[2J"));
    }

    #[test]
    fn arguments_are_shown_as_shell_words() {
        assert_eq!(shell_quote("ls"), "ls");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
