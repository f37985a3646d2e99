//! git's configuration syntax, read byte for byte as git's own parser (`config.c`) reads
//! it: the same characters start a comment, end a key or a section header, and escape,
//! quote or continue a value. A text git would refuse is refused here too, and a few that
//! git accepts but never writes are refused as well ([`Problem::stricter_than_git`]), so
//! what the caller gets is exactly the entries git would see.
//!
//! Names come out in git's canonical form: section and key lowercased, the subsection as
//! written (the legacy `[section.subsection]` form lowercases it, as git does).

/// One configuration entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Lowercased.
    pub section: String,
    /// As written in `[section "subsection"]`; lowercased in `[section.subsection]`.
    pub subsection: Option<Vec<u8>>,
    /// Lowercased.
    pub key: String,
    /// `None` for a key alone on its line (git reads it as boolean true).
    pub value: Option<Vec<u8>>,
}

impl Entry {
    /// The full name as git prints it: `section.subsection.key`.
    pub fn name(&self) -> Vec<u8> {
        let mut name = self.section.as_bytes().to_vec();
        if let Some(sub) = &self.subsection {
            name.push(b'.');
            name.extend_from_slice(sub);
        }
        name.push(b'.');
        name.extend_from_slice(self.key.as_bytes());
        name
    }

    /// [`Entry::name`] for people (a subsection that is not UTF-8 shown lossily).
    pub fn display_name(&self) -> String {
        String::from_utf8_lossy(&self.name()).into_owned()
    }
}

/// Why a text cannot be read, and on which line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct SyntaxError {
    pub line: usize,
    pub problem: Problem,
}

/// What is wrong with a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("a NUL byte (git would cut the text short there)")]
    Nul,
    #[error("an incomplete UTF-8 byte order mark at the start")]
    PartialBom,
    #[error("a section header that is not `[name]` or `[name \"subsection\"]`")]
    BadHeader,
    #[error("a dotted section name with an empty part or a quoted subsection after it")]
    OddSectionName,
    #[error("an entry before any section header")]
    NoSection,
    #[error("a key that does not start with a letter")]
    BadKeyStart,
    #[error("a key followed by something other than `=`, a value or the end of the line")]
    BadKey,
    #[error("a quoted value that does not end on its line")]
    UnterminatedQuote,
    #[error("an unknown escape sequence (only \\n, \\t, \\b, \\\\ and \\\" are known)")]
    BadEscape,
}

impl Problem {
    /// Whether git itself would read a text with this problem: these are refused only
    /// because git never writes them and nobody should need them.
    pub fn stricter_than_git(self) -> bool {
        matches!(
            self,
            Problem::Nul | Problem::OddSectionName | Problem::NoSection
        )
    }
}

/// Reads `text` as git would; any problem refuses the whole text.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, SyntaxError> {
    let mut entries = vec![];
    Parser::new(text).run(&mut |entry| entries.push(entry), false)?;
    Ok(entries)
}

/// Reads `text` as well as it can: a line with a problem is passed over and reading
/// resumes on the next one. For configurations that only widen what is protected.
pub fn parse_lenient(text: &[u8]) -> Vec<Entry> {
    let mut entries = vec![];
    // Lenient, `run` reports no problem.
    let _ = Parser::new(text).run(&mut |entry| entries.push(entry), true);
    entries
}

/// git's `isspace`: space, tab, newline and carriage return (not `\v` or `\f`).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// git's `iskeychar`.
fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

const BOM: &[u8] = b"\xef\xbb\xbf";

/// The section a header opened.
struct Header {
    section: String,
    subsection: Option<Vec<u8>>,
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
    eof: bool,
    /// Whether the last character read ended a line (so that recovery does not skip the
    /// next one).
    at_line_end: bool,
}

impl<'a> Parser<'a> {
    fn new(text: &'a [u8]) -> Parser<'a> {
        Parser {
            text,
            pos: 0,
            line: 1,
            eof: false,
            at_line_end: false,
        }
    }

    /// git's `get_next_char`: `\r\n` reads as `\n`, and the end of the text as a `\n`
    /// with `eof` set.
    fn next(&mut self) -> u8 {
        let Some(&c) = self.text.get(self.pos) else {
            self.eof = true;
            self.at_line_end = true;
            return b'\n';
        };
        self.pos += 1;
        let c = if c == b'\r' && self.text.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            b'\n'
        } else {
            c
        };
        if c == b'\n' {
            self.line += 1;
        }
        self.at_line_end = c == b'\n';
        c
    }

    fn error(&self, problem: Problem) -> SyntaxError {
        // A problem found at a line's end belongs to that line.
        let line = if self.at_line_end && !self.eof {
            self.line - 1
        } else {
            self.line
        };
        SyntaxError { line, problem }
    }

    /// git's `git_parse_source`. With `lenient`, a line with a problem is skipped, and a
    /// NUL byte or a broken byte order mark is read as any other unexpected byte.
    fn run(&mut self, emit: &mut dyn FnMut(Entry), lenient: bool) -> Result<(), SyntaxError> {
        if let Some(at) = self.text.iter().position(|&c| c == 0).filter(|_| !lenient) {
            let line = 1 + self.text[..at].iter().filter(|&&c| c == b'\n').count();
            return Err(SyntaxError {
                line,
                problem: Problem::Nul,
            });
        }
        if self.text.starts_with(BOM) {
            self.pos = BOM.len();
        } else if self.text.first() == Some(&BOM[0]) && !lenient {
            return Err(self.error(Problem::PartialBom));
        }
        let mut header: Option<Header> = None;
        loop {
            match self.item(&mut header) {
                Ok(Some(entry)) => emit(entry),
                Ok(None) => return Ok(()),
                Err(_) if lenient => {
                    while !self.at_line_end {
                        self.next();
                    }
                    if self.eof {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads up to and including the next entry; `None` at the end of the text.
    fn item(&mut self, header: &mut Option<Header>) -> Result<Option<Entry>, SyntaxError> {
        let mut comment = false;
        loop {
            let c = self.next();
            if c == b'\n' {
                if self.eof {
                    return Ok(None);
                }
                comment = false;
                continue;
            }
            if comment || is_space(c) {
                continue;
            }
            if c == b'#' || c == b';' {
                comment = true;
                continue;
            }
            if c == b'[' {
                *header = Some(self.header()?);
                continue;
            }
            if !c.is_ascii_alphabetic() {
                return Err(self.error(Problem::BadKeyStart));
            }
            let (key, value) = self.key_and_value(c)?;
            let Some(h) = header else {
                return Err(self.error(Problem::NoSection));
            };
            return Ok(Some(Entry {
                section: h.section.clone(),
                subsection: h.subsection.clone(),
                key,
                value,
            }));
        }
    }

    /// git's `get_base_var`, after the `[`.
    fn header(&mut self) -> Result<Header, SyntaxError> {
        let mut name = Vec::new();
        loop {
            let c = self.next();
            if self.eof {
                return Err(self.error(Problem::BadHeader));
            }
            if c == b']' {
                break;
            }
            if is_space(c) {
                return self.quoted_subsection(name, c);
            }
            if !is_key_char(c) && c != b'.' {
                return Err(self.error(Problem::BadHeader));
            }
            name.push(c.to_ascii_lowercase());
        }
        if name.is_empty() {
            return Err(self.error(Problem::BadHeader));
        }
        // The legacy `[section.subsection]`: git keeps the dotted name whole and later
        // splits it at its first dot, so `[a.b.c]` is section `a`, subsection `b.c`.
        let name = String::from_utf8_lossy(&name).into_owned();
        match name.split_once('.') {
            None => Ok(Header {
                section: name,
                subsection: None,
            }),
            Some((section, sub))
                if !section.is_empty() && sub.split('.').all(|p| !p.is_empty()) =>
            {
                Ok(Header {
                    section: section.to_owned(),
                    subsection: Some(sub.as_bytes().to_vec()),
                })
            }
            Some(_) => Err(self.error(Problem::OddSectionName)),
        }
    }

    /// git's `get_extended_base_var`: `[name "subsection"]`, from the whitespace after
    /// the name.
    fn quoted_subsection(&mut self, name: Vec<u8>, mut c: u8) -> Result<Header, SyntaxError> {
        loop {
            if c == b'\n' {
                return Err(self.error(Problem::BadHeader));
            }
            c = self.next();
            if !is_space(c) {
                break;
            }
        }
        if c != b'"' {
            return Err(self.error(Problem::BadHeader));
        }
        let mut sub = Vec::new();
        loop {
            let mut c = self.next();
            if c == b'\n' {
                return Err(self.error(Problem::BadHeader));
            }
            if c == b'"' {
                break;
            }
            // git takes any escaped character as itself.
            if c == b'\\' {
                c = self.next();
                if c == b'\n' {
                    return Err(self.error(Problem::BadHeader));
                }
            }
            sub.push(c);
        }
        if self.next() != b']' {
            return Err(self.error(Problem::BadHeader));
        }
        // git accepts `[ "x"]` (an empty section) and `[a.b "c"]`; neither is ever
        // written, and both blur where the section ends.
        if name.is_empty() || name.contains(&b'.') {
            return Err(self.error(Problem::OddSectionName));
        }
        Ok(Header {
            section: String::from_utf8_lossy(&name).into_owned(),
            subsection: Some(sub),
        })
    }

    /// git's `get_value`: the rest of the key after its first letter `first`, then the
    /// value, if any.
    fn key_and_value(&mut self, first: u8) -> Result<(String, Option<Vec<u8>>), SyntaxError> {
        let mut key = String::from(char::from(first.to_ascii_lowercase()));
        let mut c;
        loop {
            c = self.next();
            if self.eof || !is_key_char(c) {
                break;
            }
            key.push(char::from(c.to_ascii_lowercase()));
        }
        while c == b' ' || c == b'\t' {
            c = self.next();
        }
        if c == b'\n' {
            return Ok((key, None));
        }
        if c != b'=' {
            return Err(self.error(Problem::BadKey));
        }
        Ok((key, Some(self.value()?)))
    }

    /// git's `parse_value`: quotes, escapes, continuation lines, comments, and trailing
    /// whitespace outside quotes dropped.
    fn value(&mut self) -> Result<Vec<u8>, SyntaxError> {
        let mut out = Vec::new();
        let (mut quoted, mut comment) = (false, false);
        // Where unquoted trailing whitespace began, if the value ends in some.
        let mut trim_at = 0;
        loop {
            let mut c = self.next();
            if c == b'\n' {
                if quoted {
                    return Err(self.error(Problem::UnterminatedQuote));
                }
                if trim_at > 0 {
                    out.truncate(trim_at);
                }
                return Ok(out);
            }
            if comment {
                continue;
            }
            if is_space(c) && !quoted {
                if trim_at == 0 {
                    trim_at = out.len();
                }
                if !out.is_empty() {
                    out.push(c);
                }
                continue;
            }
            if !quoted && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            trim_at = 0;
            if c == b'\\' {
                c = match self.next() {
                    b'\n' => continue,
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'n' => b'\n',
                    c @ (b'\\' | b'"') => c,
                    _ => return Err(self.error(Problem::BadEscape)),
                };
                out.push(c);
                continue;
            }
            if c == b'"' {
                quoted = !quoted;
                continue;
            }
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(name, value)` pairs, values lossily as text, `None` for a key alone.
    fn entries(text: &str) -> Vec<(String, Option<String>)> {
        parse(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .into_iter()
            .map(|e| {
                let value = e
                    .value
                    .as_deref()
                    .map(|v| String::from_utf8_lossy(v).into_owned());
                (e.display_name(), value)
            })
            .collect()
    }

    fn one(text: &str) -> (String, Option<String>) {
        let mut all = entries(text);
        assert_eq!(all.len(), 1, "{text:?}: {all:?}");
        all.remove(0)
    }

    fn value(text: &str) -> String {
        one(text)
            .1
            .unwrap_or_else(|| panic!("{text:?} has no value"))
    }

    #[track_caller]
    fn refused(text: &[u8], problem: Problem) {
        match parse(text) {
            Err(e) => assert_eq!(
                e.problem,
                problem,
                "{:?}: {e}",
                String::from_utf8_lossy(text)
            ),
            Ok(e) => panic!("{:?} was read: {e:?}", String::from_utf8_lossy(text)),
        }
    }

    #[test]
    fn sections_and_subsections() {
        assert_eq!(one("[Core]\n\tBare = false\n").0, "core.bare");
        assert_eq!(
            one("[remote \"Origin\"]\n\turl = x\n").0,
            "remote.Origin.url"
        );
        // The legacy form lowercases the subsection, as git does.
        assert_eq!(one("[remote.Origin]\n\turl = x\n").0, "remote.origin.url");
        assert_eq!(one("[a.b.c]k=1").0, "a.b.c.k");
        // Escapes in a subsection: any character stands for itself.
        assert_eq!(one("[a \"q\\\"b\\\\s\\x\"]k=1").0, "a.q\"b\\sx.k");
        assert_eq!(one("[a\t \"sp ace\"]k=1").0, "a.sp ace.k");
        assert_eq!(one("[a \"\"]k=1").0, "a..k");
        // An entry may follow the header on its line.
        assert_eq!(one("[a] k = 1 ; c").0, "a.k");
        assert_eq!(one("  [a]\n  K-2 = 1").0, "a.k-2");
    }

    #[test]
    fn keys_and_values() {
        assert_eq!(one("[a]\nflag\n"), ("a.flag".into(), None));
        assert_eq!(one("[a]\nk =\n"), ("a.k".into(), Some(String::new())));
        assert_eq!(value("[a]k = plain words  "), "plain words");
        assert_eq!(value("[a]k=\" quoted  \" "), " quoted  ");
        assert_eq!(
            value("[a]k = half\" quoted # kept\"; dropped"),
            "half quoted # kept"
        );
        assert_eq!(value("[a]k = x # comment"), "x");
        assert_eq!(value("[a]k = x;comment"), "x");
        assert_eq!(
            value("[a]k = a\\tb\\nc\\bd\\\\e\\\"f"),
            "a\tb\nc\x08d\\e\"f"
        );
        assert_eq!(value("[a]k = \"\" x"), "x");
        assert_eq!(value("[a]k = one \\\n   two"), "one    two");
        assert_eq!(value("[a]k = \"one \\\ntwo\""), "one two");
        assert_eq!(value("[a]k = end\\"), "end");
        assert_eq!(value("[a]k = x\ty"), "x\ty");
        assert_eq!(entries("[a]k=1\n[a]K=2\n").len(), 2);
    }

    #[test]
    fn comments_whitespace_line_ends_and_bom() {
        let text = "\u{feff}# top\r\n; also\r\n[a]\r\n\tk = v \r\n\r\n  j\r\n";
        assert_eq!(
            entries(text),
            [("a.k".into(), Some("v".into())), ("a.j".into(), None)]
        );
        // A lone carriage return is whitespace, as in git.
        assert_eq!(one("[a]\rk=1").0, "a.k");
        assert!(entries("").is_empty());
        assert!(entries("\n# only a comment").is_empty());
    }

    #[test]
    fn what_git_refuses_is_refused() {
        refused(b"\xef\xbb[a]k=1", Problem::PartialBom);
        refused(b"\xef[a]k=1", Problem::PartialBom);
        refused(b"[]k=1", Problem::BadHeader);
        refused(b"[a", Problem::BadHeader);
        refused(b"[a\n]k=1", Problem::BadHeader);
        refused(b"[a_b]k=1", Problem::BadHeader);
        refused(b"[a \"x\" ]k=1", Problem::BadHeader);
        refused(b"[a x]k=1", Problem::BadHeader);
        refused(b"[a \"x\nk=1", Problem::BadHeader);
        refused(b"[a \"x\\\n\"]k=1", Problem::BadHeader);
        refused(b"[a]\n1k=1", Problem::BadKeyStart);
        refused(b"[a]\n-k=1", Problem::BadKeyStart);
        refused(b"[a]\nk_x=1", Problem::BadKey);
        refused(b"[a]\nk ;c", Problem::BadKey);
        refused(b"[a]\nk : 1", Problem::BadKey);
        refused(b"[a]\nk\r=1", Problem::BadKey);
        refused(b"[a]\nk = \"open\n", Problem::UnterminatedQuote);
        refused(b"[a]\nk = \"open", Problem::UnterminatedQuote);
        refused(b"[a]\nk = \\q", Problem::BadEscape);
        refused(b"[a]\nk = \\\rx", Problem::BadEscape);
    }

    #[test]
    fn what_git_reads_but_never_writes_is_refused_too() {
        refused(b"[a]k=v\0x", Problem::Nul);
        refused(b"k=v", Problem::NoSection);
        refused(b"[ \"x\"]k=v", Problem::OddSectionName);
        refused(b"[a.b \"c\"]k=v", Problem::OddSectionName);
        refused(b"[a..b]k=v", Problem::OddSectionName);
        refused(b"[a.]k=v", Problem::OddSectionName);
        refused(b"[.a]k=v", Problem::OddSectionName);
        for p in [Problem::Nul, Problem::NoSection, Problem::OddSectionName] {
            assert!(p.stricter_than_git());
        }
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse(b"[a]\nk=1\nk = \"x\n").err();
        assert_eq!(e.map(|e| e.line), Some(3));
        let e = parse(b"[a]\n\nk=1\n\n\0").err();
        assert_eq!(
            e.map(|e| e.to_string()),
            Some(format!("line 5: {}", Problem::Nul))
        );
    }

    #[test]
    fn lenient_reading_skips_only_the_broken_line() {
        let text = b"[a]\nk = \"open\nj = 1\n[b\nm = 2\n\0bad\nn = \\q\no = 3\n";
        let names: Vec<String> = parse_lenient(text)
            .iter()
            .map(Entry::display_name)
            .collect();
        assert_eq!(names, ["a.j", "a.m", "a.o"]);
    }
}
