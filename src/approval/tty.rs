//! The terminal prompt. It talks to `/dev/tty` directly — never to the
//! command's stdin or stdout, which may be pipes an agent reads — and only when sandgate is
//! in the terminal's foreground process group: an agent's full-screen UI that runs commands
//! in the background must not have its screen and keystrokes taken over.
//!
//! Only typing the short random code the prompt shows grants; `y`, `yes`, Enter and anything
//! else reject. EOF (Ctrl-D), Ctrl-C (watched by `approval::ask`) and the timeout cancel.
//! The code is drawn from the kernel's CSPRNG after the question is built and is written
//! nowhere but the terminal, and what was typed before the prompt appeared is discarded.
//! So a process that paints a forged prompt (a left-over background job of an earlier
//! sandboxed call, say) cannot show the right code, and nothing typed in answer to it
//! counts. Everything shown is neutralised, so a justification or an argument cannot
//! repaint the prompt with escape sequences.
//!
//! Who may answer here at all is decided first (`TtyAnswerer::decide`): through an agent's
//! link the terminal is usually the agent's own pty, which could read the code and type it.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{tcflush, FlushArg};

use super::{interrupted, Answerer, Interrupt, Outcome, Question};
use crate::shell::Caller;

/// What `SANDGATE_TTY` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtySetting {
    /// Unset, empty or `auto`: the terminal answers for a person's call only.
    Auto,
    /// The terminal answers through an agent's link too: a person owns it.
    Always,
    /// The terminal never answers (as `--no-tty`).
    Never,
    /// Any other value: taken as `auto`, and named where it makes a difference.
    Unknown(String),
}

impl TtySetting {
    /// Reads `SANDGATE_TTY`.
    pub fn from_env() -> TtySetting {
        TtySetting::parse(std::env::var_os("SANDGATE_TTY").as_deref())
    }

    fn parse(value: Option<&OsStr>) -> TtySetting {
        match value.map(OsStr::to_string_lossy).as_deref() {
            None | Some("" | "auto") => TtySetting::Auto,
            Some("always") => TtySetting::Always,
            Some("never") => TtySetting::Never,
            Some(other) => TtySetting::Unknown(other.to_owned()),
        }
    }
}

/// Where an answer can come from when the terminal is not asked.
const ELSEWHERE: &str =
    "configure --approval-endpoint or --approver, or start `sandgate approvals serve`";

/// Who may answer an approval question on the terminal, decided once per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtyAnswerer {
    /// The person at the terminal, by typing the code the prompt shows.
    Person,
    /// Nobody: no prompt is written. `why` says how to get an answer instead.
    Nobody { why: String },
}

impl TtyAnswerer {
    /// `--no-tty` and `SANDGATE_TTY=never` turn the terminal off, so does `CI`; through an
    /// agent's link it answers only with `SANDGATE_TTY=always`.
    pub fn decide(caller: Caller, setting: &TtySetting, no_tty: bool, in_ci: bool) -> TtyAnswerer {
        let nobody = |why: String| TtyAnswerer::Nobody { why };
        if no_tty || *setting == TtySetting::Never {
            return nobody(format!(
                "the terminal prompt is disabled (--no-tty or SANDGATE_TTY=never): {ELSEWHERE}"
            ));
        }
        if in_ci {
            return nobody(format!(
                "CI is set, so nobody can answer a prompt: {ELSEWHERE}"
            ));
        }
        match (caller, setting) {
            (Caller::Person, _) | (Caller::AgentLink, TtySetting::Always) => TtyAnswerer::Person,
            (Caller::AgentLink, setting) => {
                let ignored = match setting {
                    TtySetting::Unknown(v) => format!(" (SANDGATE_TTY={v:?} is not `always`)"),
                    _ => String::new(),
                };
                nobody(format!(
                    "sandgate was started through a link (sandgate-sh, a bash link, \
                     sandgate-prefix), where the terminal is not asked: the agent that owns it \
                     could answer its own request{ignored}. Start `sandgate approvals serve`, \
                     configure an approval endpoint (SANDGATE_APPROVAL_ENDPOINT) or an \
                     approver program (SANDGATE_APPROVER), or set SANDGATE_TTY=always if a \
                     person owns this terminal"
                ))
            }
        }
    }
}

impl From<TtyAnswerer> for Answerer {
    fn from(who: TtyAnswerer) -> Answerer {
        match who {
            TtyAnswerer::Person => Answerer::Tty,
            TtyAnswerer::Nobody { why } => Answerer::None { why },
        }
    }
}

/// How many characters the code has: about 5 million codes, one guess per prompt.
const CODE_LEN: usize = 5;

/// Capitals and digits that cannot be mistaken for one another (no 0/O/Q, 1/I/L, 2/Z,
/// 5/S, 6/G, 8/B).
const CODE_ALPHABET: &[u8] = b"ACDEFHJKMNPRTUVWXY3479";

/// Returns a fresh code: `CODE_LEN` characters drawn uniformly from `CODE_ALPHABET` with
/// bytes from the kernel's CSPRNG (bytes past the last whole multiple of the alphabet are
/// dropped, so no character is likelier than another).
pub(crate) fn fresh_code() -> std::io::Result<String> {
    let n = CODE_ALPHABET.len();
    let limit = 256 - 256 % n;
    let mut code = String::with_capacity(CODE_LEN);
    while code.len() < CODE_LEN {
        let mut bytes = [0u8; 16];
        super::random_bytes(&mut bytes)?;
        for b in bytes.map(usize::from).into_iter().filter(|b| *b < limit) {
            if code.len() < CODE_LEN {
                code.push(char::from(CODE_ALPHABET[b % n]));
            }
        }
    }
    Ok(code)
}

/// What a typed line means: only the code grants, whatever its case and surrounding blanks.
pub(crate) fn judge(line: &str, code: &str) -> Outcome {
    if line.trim().eq_ignore_ascii_case(code) {
        Outcome::AllowedOnce
    } else {
        Outcome::Rejected
    }
}

/// Returns `s` made safe to show a person: every control character, bidirectional
/// control and invisible character is shown as an escape (`\u{1b}`), so nothing can move
/// the cursor, change colours, clear the screen, reorder the text or hide in it; and a
/// run of [`LONG_BLANK`] or more spaces is shown as its count, so padding cannot push the
/// start of a command off the screen while its harmless end stays in view.
pub fn neutralise(s: &str) -> String {
    let mut shown = String::with_capacity(s.len());
    let mut spaces = 0usize;
    let flush = |shown: &mut String, spaces: &mut usize| {
        if *spaces >= LONG_BLANK {
            shown.push_str(&format!("\\u{{20}}×{spaces}"));
        } else {
            shown.extend(std::iter::repeat_n(' ', *spaces));
        }
        *spaces = 0;
    };
    for c in s.chars() {
        if c == ' ' {
            spaces += 1;
            continue;
        }
        flush(&mut shown, &mut spaces);
        if c.is_control() || is_bidi_control(c) || is_invisible(c) {
            shown.extend(c.escape_unicode());
        } else {
            shown.push(c);
        }
    }
    flush(&mut shown, &mut spaces);
    shown
}

/// The shortest run of spaces [`neutralise`] shows as a count.
const LONG_BLANK: usize = 8;

/// Characters that show as nothing, or as a line break: two different texts could look
/// the same, or one line look like two.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Unicode bidirectional overrides can reorder what a person reads: every character with
/// the Bidi_Control property (embeddings, overrides, isolates and the three marks).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
    )
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

/// Asks the person at the terminal, who grants by typing the code shown.
pub fn ask(question: &Question, interrupt: Interrupt<'_>) -> Outcome {
    let unavailable = |why: &str| Outcome::Unavailable {
        why: why.to_owned(),
    };
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return unavailable(&format!("there is no terminal to ask: {ELSEWHERE}"));
    };
    let foreground = nix::unistd::tcgetpgrp(tty.as_fd()).ok() == Some(nix::unistd::getpgrp());
    if !foreground {
        return unavailable(&format!(
            "sandgate is not in the terminal's foreground process group, so it will not \
             prompt there: {ELSEWHERE}"
        ));
    }
    let r = &question.request;
    let argv: Vec<String> = r
        .command
        .argv
        .iter()
        .map(|a| neutralise(&shell_quote(a)))
        .collect();
    let question_text = format!(
        "\nsandgate: a command asks to run with a wider sandbox\n  command:       {}\n  cwd:           {}\n  workspace:     {}\n  sandbox:       {} -> {}\n  justification: {}\n",
        argv.join(" "),
        neutralise(&r.command.cwd),
        neutralise(&r.workspace),
        r.standing.mode,
        r.requested.mode,
        neutralise(&r.requested.justification),
    );
    // The code exists only from here on, and only on the terminal.
    let Ok(code) = fresh_code() else {
        return unavailable("no randomness for the confirmation code (/dev/urandom)");
    };
    // Lines typed before the real prompt (perhaps at a forged one) are not answers to it.
    if tcflush(tty.as_fd(), FlushArg::TCIFLUSH).is_err() {
        return unavailable("cannot discard what was typed before the prompt");
    }
    let prompt = format!(
        "{question_text}To allow this one call, type the code {code} and press Enter.\n\
         y or yes does not allow it: any answer but the code rejects; Ctrl-C cancels.\n\
         code: "
    );
    if tty.write_all(prompt.as_bytes()).is_err() {
        return unavailable("cannot write to the terminal");
    }
    let answer = read_answer(&mut tty, question, &code, interrupt);
    let verdict: &[u8] = match answer {
        Outcome::AllowedOnce => b"sandgate: allowed once\n",
        Outcome::Rejected => b"sandgate: rejected (that is not the code shown)\n",
        Outcome::Cancelled { .. } | Outcome::Unavailable { .. } => b"\n",
    };
    let _ = tty.write_all(verdict);
    answer
}

/// Reads one line and judges it against `code`; EOF, the timeout and `interrupt` (Ctrl-C:
/// the caller blocks SIGINT for the whole question, see `approval::ask`) cancel.
fn read_answer(
    tty: &mut std::fs::File,
    question: &Question,
    code: &str,
    interrupt: Interrupt<'_>,
) -> Outcome {
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
        let mut fds = [
            PollFd::new(tty.as_fd(), PollFlags::POLLIN),
            PollFd::new(interrupt.fd(), PollFlags::POLLIN),
        ];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return cancelled("the terminal went away"),
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return interrupted();
        }
        let mut buf = [0u8; 256];
        match tty.read(&mut buf) {
            Ok(0) => return cancelled("end of input at the prompt"),
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return cancelled("the terminal went away"),
        }
        // A terminal left in raw mode sends Enter as a carriage return.
        if let Some(end) = line.iter().position(|b| *b == b'\n' || *b == b'\r') {
            return judge(&String::from_utf8_lossy(&line[..end]), code);
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
    fn nothing_hides_in_what_is_shown() {
        let shown = neutralise("rm -rf ~\u{200b}x\u{2028}y\u{feff}\u{e0041}");
        for hidden in ["\u{200b}", "\u{2028}", "\u{feff}", "\u{e0041}"] {
            assert!(!shown.contains(hidden), "{shown:?}");
        }
        let padded = format!("curl x|sh #{}make test", " ".repeat(4000));
        assert_eq!(neutralise(&padded), "curl x|sh #\\u{20}×4000make test");
        assert_eq!(neutralise("a  b       c"), "a  b       c");
        assert_eq!(neutralise("tail        "), "tail\\u{20}×8");
    }

    #[test]
    fn only_the_code_grants() {
        let code = "K7QX3";
        for line in ["K7QX3", "k7qx3", "  K7qx3 \t", "\tk7QX3"] {
            assert_eq!(judge(line, code), Outcome::AllowedOnce, "{line:?}");
        }
        for line in [
            "y", "yes", "Y", "YES", "", " ", "K7QX", "K7QX33", "K7 QX3", "K7QX3 y",
        ] {
            assert_eq!(judge(line, code), Outcome::Rejected, "{line:?}");
        }
    }

    #[test]
    fn codes_are_short_unambiguous_and_fresh() {
        let codes: Vec<String> = (0..64).map(|_| fresh_code().unwrap()).collect();
        for code in &codes {
            assert_eq!(code.len(), CODE_LEN, "{code}");
            assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
        }
        let mut distinct = codes.clone();
        distinct.sort();
        distinct.dedup();
        // 64 draws from ~5 million: a repeat means the source is not random.
        assert_eq!(distinct.len(), codes.len(), "{codes:?}");
        for confusable in b"0OQ1IL2Z5S6G8B" {
            assert!(
                !CODE_ALPHABET.contains(confusable),
                "{}",
                *confusable as char
            );
        }
    }

    #[test]
    fn the_terminal_answers_a_persons_call_and_through_a_link_only_when_always() {
        use TtySetting::*;
        let person = |who: &TtyAnswerer| *who == TtyAnswerer::Person;
        let agent = Caller::AgentLink;
        assert!(person(&TtyAnswerer::decide(
            Caller::Person,
            &Auto,
            false,
            false
        )));
        assert!(person(&TtyAnswerer::decide(agent, &Always, false, false)));
        for setting in [Auto, Never, Unknown("1".into()), Unknown("yes".into())] {
            assert!(
                !person(&TtyAnswerer::decide(agent, &setting, false, false)),
                "{setting:?}"
            );
        }
        // --no-tty, never and CI win over everything, `always` included.
        for caller in [Caller::Person, agent] {
            assert!(!person(&TtyAnswerer::decide(caller, &Always, true, false)));
            assert!(!person(&TtyAnswerer::decide(caller, &Always, false, true)));
            assert!(!person(&TtyAnswerer::decide(caller, &Never, false, false)));
        }
        let TtyAnswerer::Nobody { why } = TtyAnswerer::decide(agent, &Auto, false, false) else {
            panic!("the terminal answered through a link");
        };
        for how in [
            "SANDGATE_APPROVAL_ENDPOINT",
            "SANDGATE_APPROVER",
            "SANDGATE_TTY=always",
        ] {
            assert!(why.contains(how), "{why}");
        }
    }

    #[test]
    fn the_setting_is_read_strictly() {
        let parse = |v: &str| TtySetting::parse(Some(OsStr::new(v)));
        assert_eq!(TtySetting::parse(None), TtySetting::Auto);
        assert_eq!(parse(""), TtySetting::Auto);
        assert_eq!(parse("auto"), TtySetting::Auto);
        assert_eq!(parse("always"), TtySetting::Always);
        assert_eq!(parse("never"), TtySetting::Never);
        assert_eq!(parse("Always"), TtySetting::Unknown("Always".into()));
    }

    #[test]
    fn arguments_are_shown_as_shell_words() {
        assert_eq!(shell_quote("ls"), "ls");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
